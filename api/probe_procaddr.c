/* SPDX-License-Identifier: MIT */
/* Measurement tool (run on a GPU machine, not built): asks the real driver cuGetProcAddress_v2
 * for every (name, version, flags) and names the exported symbol each pointer is. Its output
 * was condensed into api/procaddr.tsv. Build: gcc -O1 probe_procaddr.c -ldl. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int (*gpa2_t)(const char *, void **, int, unsigned long long, int *);
typedef int (*gpa1_t)(const char *, void **, int, unsigned long long);
typedef int (*init_t)(unsigned);
typedef int (*dv_t)(int *);
static void *H;
/* candidate exported names -> address table for alias lookup */
static struct {
    void *a;
    char n[128];
} tab[20000];
static int ntab;
static void addcand(const char *n)
{
    void *a = dlsym(H, n);
    if (!a)
        return;
    for (int i = 0; i < ntab; i++)
        if (!strcmp(tab[i].n, n))
            return;
    tab[ntab].a = a;
    snprintf(tab[ntab].n, 128, "%s", n);
    ntab++;
}
static void aliases(void *fn, char *out, size_t sz)
{
    out[0] = 0;
    size_t l = 0;
    for (int i = 0; i < ntab; i++)
        if (tab[i].a == fn) {
            l += snprintf(out + l, sz > l ? sz - l : 0, "%s%s", l ? "," : "", tab[i].n);
        }
    if (!l)
        strcpy(out, "-");
}
static void describe(void *fn, char *sym, size_t ssz, char *off, size_t osz)
{
    Dl_info di;
    memset(&di, 0, sizeof di);
    if (!fn) {
        snprintf(sym, ssz, "NULL");
        snprintf(off, osz, "-");
        return;
    }
    if (dladdr(fn, &di) && di.dli_sname && di.dli_saddr == fn)
        snprintf(sym, ssz, "%s", di.dli_sname);
    else
        snprintf(sym, ssz, "?");
    if (di.dli_fbase)
        snprintf(off, osz, "%s+0x%lx",
                 di.dli_fname
                     ? (strrchr(di.dli_fname, '/') ? strrchr(di.dli_fname, '/') + 1 : di.dli_fname)
                     : "?",
                 (unsigned long)((char *)fn - (char *)di.dli_fbase));
    else
        snprintf(off, osz, "%p", fn);
}
int main(int argc, char **argv)
{
    const char *lib =
        getenv("PROBE_LIB") ? getenv("PROBE_LIB") : "/usr/local/nvidia/lib64/libcuda.so.1";
    if (argc < 5) {
        fprintf(stderr, "usage: probe names_versions.txt sweep_versions.txt cands.txt outdir\n");
        return 2;
    }
    H = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!H) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    init_t cuInit = (init_t)dlsym(H, "cuInit");
    gpa2_t gpa2 = (gpa2_t)dlsym(H, "cuGetProcAddress_v2");
    gpa1_t gpa1 = (gpa1_t)dlsym(H, "cuGetProcAddress");
    dv_t dv = (dv_t)dlsym(H, "cuDriverGetVersion");
    if (!cuInit || !gpa2) {
        fprintf(stderr, "missing syms\n");
        return 1;
    }
    int r = cuInit(0);
    int ver = 0;
    if (dv)
        dv(&ver);
    fprintf(stderr, "cuInit=%d driverVersion=%d gpa1=%p\n", r, ver, (void *)gpa1);
    char line[8192], name[256];
    FILE *c = fopen(argv[3], "r");
    while (fgets(line, sizeof line, c)) {
        line[strcspn(line, "\r\n")] = 0;
        if (*line)
            addcand(line);
    }
    fclose(c);
    fprintf(stderr, "alias table: %d exported candidate names resolved\n", ntab);
    int sv[256], nsv = 0;
    FILE *s = fopen(argv[2], "r");
    while (nsv < 256 && fscanf(s, "%d", &sv[nsv]) == 1)
        nsv++;
    fclose(s);
    char p1[1024], p2[1024], p3[1024];
    snprintf(p1, sizeof p1, "%s/procaddr_map.tsv", argv[4]);
    snprintf(p2, sizeof p2, "%s/procaddr_sweep.tsv", argv[4]);
    snprintf(p3, sizeof p3, "%s/procaddr_v1_vs_v2.tsv", argv[4]);
    FILE *o = fopen(p1, "w"), *w = fopen(p2, "w"), *v = fopen(p3, "w");
    fprintf(o, "name\tversion\tflags\trc\tsymbolStatus\tresolved\texact\toffset\taliases\n");
    fprintf(w, "name\tversion\tflags\trc\tsymbolStatus\tresolved\n");
    fprintf(v, "name\tversion\tflags\tv1_rc\tv1_resolved\tv2_rc\tv2_resolved\tsame\n");
    FILE *nv = fopen(argv[1], "r");
    int rows = 0;
    while (fgets(line, sizeof line, nv)) {
        char *tok = strtok(line, " \t\r\n");
        if (!tok)
            continue;
        snprintf(name, sizeof name, "%s", tok);
        int vs[64], nvs = 0;
        while ((tok = strtok(NULL, " \t\r\n")) && nvs < 64)
            vs[nvs++] = atoi(tok);
        for (int i = 0; i < nvs; i++)
            for (int f = 0; f < 3; f++) {
                void *fn = NULL;
                int st = -1;
                int rc = gpa2(name, &fn, vs[i], (unsigned long long)f, &st);
                char sym[256], off[256], al[4096];
                describe(fn, sym, sizeof sym, off, sizeof off);
                aliases(fn, al, sizeof al);
                fprintf(o, "%s\t%d\t%d\t%d\t%d\t%s\t%d\t%s\t%s\n", name, vs[i], f, rc, st, sym,
                        (fn && strcmp(sym, "?")) ? 1 : 0, off, fn ? al : "-");
                rows++;
                if (gpa1) {
                    void *fn1 = NULL;
                    int rc1 = gpa1(name, &fn1, vs[i], (unsigned long long)f);
                    char s1[256], o1[256];
                    describe(fn1, s1, sizeof s1, o1, sizeof o1);
                    fprintf(v, "%s\t%d\t%d\t%d\t%s\t%d\t%s\t%d\n", name, vs[i], f, rc1, s1, rc, sym,
                            (rc1 == rc && fn1 == fn) ? 1 : 0);
                }
            }
        for (int i = 0; i < nsv; i++)
            for (int f = 0; f < 3; f++) {
                void *fn = NULL;
                int st = -1;
                int rc = gpa2(name, &fn, sv[i], (unsigned long long)f, &st);
                char sym[256], off[256];
                describe(fn, sym, sizeof sym, off, sizeof off);
                fprintf(w, "%s\t%d\t%d\t%d\t%d\t%s\n", name, sv[i], f, rc, st,
                        strcmp(sym, "?") ? sym : off);
            }
    }
    fclose(o);
    fclose(w);
    fclose(v);
    fprintf(stderr, "rows=%d\n", rows);
    /* also dump real-driver dynamic exports for comparison */
    return 0;
}
