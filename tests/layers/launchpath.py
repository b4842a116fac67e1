#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The way of one call through openmps-server, from the objects' call graph (not a test).

From session.c's serve() through exec.c's om_exec and gen/decoders.c's table into the handler of
the entry points named (default: om_x_cuLaunchKernel), every server function reachable is walked
(calls read from `objdump -dr`: relocations and direct calls; other handlers are left out). It
prints the files on the way, and every call into a file that is already on the call stack above
the caller: a return to a file the path left on its way down (0 when the way is a straight line
down the layers of tests/layers/server.txt).

Usage: launchpath.py BUILD_DIR [om_x_HANDLER ...]
"""
import collections
import os
import re
import subprocess
import sys


def read_objects(objdir):
    defined = {}                       # global function -> file
    local = collections.defaultdict(set)  # file -> its functions (static ones too)
    calls = collections.defaultdict(set)  # (file, function) -> names it references
    for dirpath, _, names in os.walk(objdir):
        for name in names:
            if not name.endswith('.c.o'):
                continue
            obj = os.path.join(dirpath, name)
            f = os.path.relpath(obj, objdir)[:-2]
            for line in subprocess.run(['nm', obj], capture_output=True, text=True).stdout.splitlines():
                p = line.split()
                if len(p) == 3 and p[1] in 'TtDdRr':
                    local[f].add(p[2])
                    if p[1] in 'TDR':
                        defined[p[2]] = f
            cur = None
            dis = subprocess.run(['objdump', '-dr', '--no-show-raw-insn', obj],
                                 capture_output=True, text=True).stdout
            for line in dis.splitlines():
                m = re.match(r'^[0-9a-f]+ <([^>]+)>:', line)
                if m:
                    cur = m.group(1).split('.')[0]
                    continue
                if cur is None:
                    continue
                m = re.search(r'R_X86_64_\w+\s+([A-Za-z_]\w*)', line)
                if m:
                    calls[(f, cur)].add(m.group(1).split('.')[0])
                m = re.search(r'\b(?:call|jmp)\w*\s+[0-9a-f]+ <([A-Za-z_][\w.]*?)(?:\+0x[0-9a-f]+)?>', line)
                if m:
                    calls[(f, cur)].add(m.group(1).split('.')[0])
    return defined, local, calls


def main():
    build = sys.argv[1]
    want = set(sys.argv[2:]) or {'om_x_cuLaunchKernel'}
    objdir = os.path.join(build, 'CMakeFiles', 'openmps-server.dir', 'src', 'server')
    defined, local, calls = read_objects(objdir)
    table = defined.get('om_handlers')  # gen/decoders.c: om_exec reaches the handler through it

    def targets(f, name):
        if name.startswith('om_x_') and name not in want:
            return []
        if name == 'om_handlers':
            return [(defined[w], w) for w in sorted(want)]
        if name in local[f]:
            return [(f, name)]
        if name in defined and defined[name] != table:
            return [(defined[name], name)]
        return []

    files, back = ['session.c'], set()
    if table:
        files.append(table)

    def walk(node, stack, path):
        f, fn = node
        if f not in files:
            files.append(f)
        for name in sorted(calls.get(node, ())):
            for t in targets(f, name):
                if t in path:
                    continue  # recursion
                if t[0] != f and t[0] in stack:
                    back.add('%s:%s -> %s:%s' % (f, fn, t[0], t[1]))
                walk(t, stack + ([t[0]] if t[0] != f else []), path | {t})

    sys.setrecursionlimit(100000)
    root = (defined['om_exec'], 'om_exec')
    walk(root, ['session.c', root[0]] + ([table] if table else []), {root})
    print('files on the way (%d): %s' % (len(files), ' '.join(files)))
    print('calls into a file already on the call stack (%d)%s' % (len(back), ':' if back else ''))
    for b in sorted(back):
        print('  ' + b)


if __name__ == '__main__':
    main()
