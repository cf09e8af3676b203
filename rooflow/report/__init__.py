"""What the user reads: the summary table, the self-checks (records: run, check, severity, value,
expected, cause, evidence), the rooflines and companion figures, and display tables.

Imports every stage below it (hardware, estimate, profilers, measure outputs read from files).
"""
