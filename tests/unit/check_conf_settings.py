#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Every OPENMPS_* variable the sources read (getenv("OPENMPS_...")) is in one of the
configuration file's two lists in src/control/conffile.c: the settings its [openmps] table may
set (read by the daemon or its servers) or the shim's own, which it refuses by name. A new
setting added to the code but not to the lists fails here, so the lists cannot drift."""
import pathlib
import re
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
conf = (root / "src/control/conffile.c").read_text()
lists = set()
for name in ("om_conf_setting_names", "shim_settings"):
    body = re.search(name + r"\[\] = \{(.*?)\};", conf, re.S)
    if not body:
        sys.exit("check_conf_settings: no list %s in src/control/conffile.c" % name)
    lists |= set(re.findall(r'"(OPENMPS_[A-Z0-9_]+)"', body.group(1)))
read = {}
for f in sorted((root / "src").rglob("*.c")):
    for m in re.finditer(r'getenv\("(OPENMPS_[A-Z0-9_]+)"\)', f.read_text()):
        read.setdefault(m.group(1), str(f.relative_to(root)))
missing = sorted(n for n in read if n not in lists)
for n in missing:
    print("%s reads %s, which neither list of src/control/conffile.c names" % (read[n], n))
if len(read) < 10:
    sys.exit("check_conf_settings: only %d variables found under %s/src" % (len(read), root))
sys.exit(1 if missing else 0)
