"""An executable file rewritten part by part with its manifest made to match
(sizes and hashes), so only the readers' schema checks can refuse it: how
the executable-format tests of the driver and of PopTorch's reader make a
well-formed file with one wrong field."""

import hashlib
import json
import zipfile

from tilefx.driver import executable as file_format


def rewritten(src, dst, edit) -> str:
    """`src` with each part through `edit(name, bytes)`, written to `dst`."""
    with zipfile.ZipFile(src) as z:
        parts = {n: z.read(n) for n in z.namelist() if n != file_format.MANIFEST}
        manifest = json.loads(z.read(file_format.MANIFEST))
    parts = {n: edit(n, b) for n, b in parts.items()}
    manifest["parts"] = {n: {"sha256": hashlib.sha256(b).hexdigest(), "size": len(b)} for n, b in parts.items()}
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as w:
        w.writestr(file_format.MANIFEST, json.dumps(manifest))
        for n, b in parts.items():
            w.writestr(n, b)
    return str(dst)
