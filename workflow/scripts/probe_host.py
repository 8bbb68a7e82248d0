import json

import gicomm_path  # noqa: F401

from gicomm.fsutil import write_atomic
from gicomm.probe import probe
from gicomm.smk import logged

with logged(snakemake):
    record = probe(snakemake.wildcards.host)
    write_atomic(snakemake.output[0], json.dumps(record, indent=2) + "\n")
    print(f"probed {record['hostname']}: provenance {record['provenance_id']}")
