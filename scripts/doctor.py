from pathlib import Path

from rooflow.io import atomic_path, write_json
from rooflow.logs import step_logging
from rooflow.measure.doctor import format_table, run_doctor

w, p, out = snakemake.wildcards, snakemake.params, snakemake.output
with step_logging(snakemake.log[0], "doctor") as log:
    Path(out.files).mkdir(parents=True, exist_ok=True)
    rows = run_doctor(w.device, p.devices_file, out.files, p.ncu, p.nsys)
    table = format_table(rows)
    log.info("\n%s", table)
    write_json(out.records, {"device": w.device, "checks": rows})
    with atomic_path(out.table) as tmp:
        tmp.write_text(table + "\n", encoding="utf-8")
