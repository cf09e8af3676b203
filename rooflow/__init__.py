"""rooflow: where a network's time goes on a machine, and how far it is from the roofline.

The package holds all the logic and knows nothing of Snakemake; the workflow's rule scripts are thin
adapters over it, and ``python -m rooflow`` / ``rooflow`` gives the same steps on the command line.
"""

__version__ = "0.1.0"

from rooflow.conventions import MODES, PRECISIONS

__all__ = ["MODES", "PRECISIONS", "__version__"]
