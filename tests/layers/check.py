#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The layer check: no function of a side's hand-written or generated C calls up.

Reads each side's layer list (tests/layers/<side>.txt: one layer per line, bottom first,
`NAME: file.c file2.c ...`, paths relative to src/<side>/, `#` comments) and the symbols of the
side's built objects (`nm`). A file may reference functions defined in its own layer or below;
a reference from a lower layer to a function defined in a higher layer fails, named by both files
and the symbol. A layer named `NAME (apart)` also keeps its files apart: none of them may
reference a function of another (the families: what two of them share goes down a layer). Every
.c file of the side must be listed, and every listed file must exist.

Usage: check.py BUILD_DIR [SIDE=TARGET[,TARGET...] ...]   (default: server=openmps-server
client=openmps_shim,om_client: the targets whose objects hold the side's files; a side whose list
is absent is skipped)
       check.py --list LIST --objects DIR --src DIR   (one side, explicit paths: the self-test)
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def read_layers(path):
    """[(name, [files])], bottom first; errors name the list's file and line."""
    layers, seen, errors = [], {}, []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split('#', 1)[0].strip()
            if not line:
                continue
            name, sep, files = line.partition(':')
            if not sep or not name.strip() or not files.split():
                errors.append('%s:%d: expected "NAME: file.c ..."' % (path, n))
                continue
            for fn in files.split():
                if fn in seen:
                    errors.append('%s:%d: %s is listed twice (line %d)' % (path, n, fn, seen[fn]))
                seen[fn] = n
            layers.append((name.strip(), files.split()))
    return layers, errors


def objects_of(objdir):
    """{source path relative to objdir (x.c): object path} of the .c.o files under objdir."""
    out = {}
    for dirpath, _, names in os.walk(objdir):
        for name in names:
            if name.endswith('.c.o'):
                full = os.path.join(dirpath, name)
                out[os.path.relpath(full, objdir)[:-2]] = full
    return out


def symbols(obj):
    """(defined functions and data, referenced undefined symbols) of one object."""
    res = subprocess.run(['nm', obj], capture_output=True, text=True, check=True)
    defined, undefined = set(), set()
    for line in res.stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in 'TDBRV':
            defined.add(parts[2])
        elif len(parts) == 2 and parts[0] == 'U':
            undefined.add(parts[1])
    return defined, undefined


def sources_of(srcdir):
    out = set()
    for dirpath, _, names in os.walk(srcdir):
        for name in names:
            if name.endswith('.c'):
                out.add(os.path.relpath(os.path.join(dirpath, name), srcdir))
    return out


def check_side(side, listpath, objdirs, srcdir):
    layers, errors = read_layers(listpath)
    level = {fn: i for i, (_, files) in enumerate(layers) for fn in files}
    name = {fn: layers[i][0] for fn, i in level.items()}
    apart = {i for i, (n, _) in enumerate(layers) if n.endswith('(apart)')}
    for fn in sorted(sources_of(srcdir) - set(level)):
        errors.append('%s: src/%s/%s is in no layer of %s' % (side, side, fn, listpath))
    for fn in sorted(set(level) - sources_of(srcdir)):
        errors.append('%s: %s lists %s, which src/%s/ lacks' % (side, listpath, fn, side))
    objs = {}
    for objdir in objdirs:
        objs.update(objects_of(objdir))
    for fn in sorted(set(level) - set(objs)):
        errors.append('%s: no object of %s under %s (built?)' % (side, fn, ' or '.join(objdirs)))
    owner, refs = {}, {}
    for fn, obj in objs.items():
        if fn not in level:
            continue
        defined, undefined = symbols(obj)
        refs[fn] = undefined
        for sym in defined:
            owner[sym] = fn
    for fn in sorted(refs):
        for sym in sorted(refs[fn]):
            to = owner.get(sym)
            if to and level[to] > level[fn]:
                errors.append('%s: %s (layer %s) calls up into %s (layer %s): %s' %
                              (side, fn, name[fn], to, name[to], sym))
            elif to and to != fn and level[to] == level[fn] and level[fn] in apart:
                errors.append('%s: %s calls %s of its layer %s, whose files stay apart: %s' %
                              (side, fn, to, name[fn], sym))
    return errors, len(refs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('build', nargs='?')
    ap.add_argument('sides', nargs='*')
    ap.add_argument('--list')
    ap.add_argument('--objects', help='object folders, comma-separated')
    ap.add_argument('--src')
    a = ap.parse_args()
    runs = []
    if a.list:
        runs.append((os.path.basename(a.list)[:-4], a.list, a.objects.split(','), a.src))
    else:
        targets = dict(s.split('=', 1) for s in a.sides) if a.sides else {
            'server': 'openmps-server', 'client': 'openmps_shim,om_client'}
        for side, target in sorted(targets.items()):
            listpath = os.path.join(HERE, side + '.txt')
            if not os.path.exists(listpath):
                print('%s: no %s, skipped' % (side, os.path.relpath(listpath, ROOT)))
                continue
            objdirs = [os.path.join(a.build, 'CMakeFiles', t + '.dir', 'src', side)
                       for t in target.split(',')]
            runs.append((side, listpath, objdirs, os.path.join(ROOT, 'src', side)))
    failed = False
    for side, listpath, objdirs, srcdir in runs:
        errors, n = check_side(side, listpath, objdirs, srcdir)
        for e in errors:
            print(e)
        print('%s: %d files, %s' % (side, n, 'FAILED' if errors else 'layers hold'))
        failed |= bool(errors)
    return 1 if failed or not runs else 0


if __name__ == '__main__':
    sys.exit(main())
