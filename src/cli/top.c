/* SPDX-License-Identifier: MIT */
/* openmps top: a live, full-screen view of the devices and their clients (as htop and nvtop
 * show processes), refreshed every -d seconds from the daemon's `stats --json` (asked as openmps
 * stats asks it, om_frontend_ask_why; read by topstats.c), sortable by GPU%, GPU time, memory,
 * calls or kernels per second. -b/--once print the same screen as plain text (no curses) for
 * scripts and tests. The screen is built as lines of text (struct screen) that either mode shows.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef OM_HAVE_CURSES
#include <curses.h>
#endif

#include "../control/frontend.h"
#include "cli.h"
#include "topstats.h"

#define TOP_LINES (OM_TOP_MAX_DEVICES + OM_TOP_MAX_CLIENTS + 16) /* a screen's lines at most */
#define TOP_WIDTH 400                                            /* a line's characters at most */

enum sort_key { SORT_GPU, SORT_TIME, SORT_MEM, SORT_CALLS, SORT_KERNELS, SORT_PID, SORT_COUNT };

static const struct {
    const char *name, *label;
    int key;
} sorts[SORT_COUNT] = {
    {"gpu", "GPU%", 'P'},      {"time", "GPU time", 'T'},     {"mem", "memory", 'M'},
    {"calls", "calls/s", 'R'}, {"kernels", "kernels/s", 'K'}, {"pid", "PID", 'N'},
};

struct top {
    double delay;   /* seconds between refreshes */
    long count;     /* refreshes to show, 0: until q */
    bool batch;     /* plain text, no curses */
    int server_pid; /* -p: one server's */
    enum sort_key sort;
    bool invert;
    struct om_top_snapshot *cur, *prev;
    bool have, have_prev; /* cur (prev) holds an answer */
    double cur_at;        /* CLOCK_MONOTONIC seconds of cur's answer */
    char why[512];        /* why there is no answer now */
    unsigned order[OM_TOP_MAX_CLIENTS];
};

struct screen {
    unsigned n;
    char line[TOP_LINES][TOP_WIDTH];
    bool strong[TOP_LINES]; /* a title or a column header */
};

static void put(struct screen *s, bool strong, const char *fmt, ...)
{
    va_list ap;

    if (s->n == TOP_LINES)
        return;
    va_start(ap, fmt);
    vsnprintf(s->line[s->n], TOP_WIDTH, fmt, ap);
    va_end(ap);
    for (char *c = s->line[s->n]; *c; c++) /* text from processes: printable only */
        if ((unsigned char)*c < 0x20 || (unsigned char)*c > 0x7e)
            *c = '?';
    s->strong[s->n++] = strong;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

static void size_text(uint64_t b, char *buf, size_t cap)
{
    static const char units[] = "KMGTP";
    double v = (double)b;
    int u = -1;

    while (v >= 1024 && u < 4) {
        v /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%llu", (unsigned long long)b);
    else
        snprintf(buf, cap, "%.1f%c", v, units[u]);
}

static void time_text(uint64_t ns, char *buf, size_t cap)
{
    double s = ns / 1e9;

    if (s < 60)
        snprintf(buf, cap, "%.2fs", s);
    else if (s < 3600)
        snprintf(buf, cap, "%um%02us", (unsigned)(s / 60), (unsigned)fmod(s, 60));
    else
        snprintf(buf, cap, "%luh%02um", (unsigned long)(s / 3600), (unsigned)fmod(s / 60, 60));
}

/* A user's name (its number where it has none, or one longer than the column), remembered: a
 * screen of many clients asks NSS once per user, not once per row. */
static void user_text(unsigned uid, char *buf, size_t cap)
{
    static struct {
        bool used;
        unsigned uid;
        char name[12];
    } seen[32];
    static unsigned next;

    for (unsigned i = 0; i < 32; i++)
        if (seen[i].used && seen[i].uid == uid) {
            snprintf(buf, cap, "%s", seen[i].name);
            return;
        }
    struct passwd *pw = getpwuid(uid);
    unsigned k = next++ % 32;
    seen[k].used = true;
    seen[k].uid = uid;
    if (pw && strlen(pw->pw_name) <= 8)
        snprintf(seen[k].name, sizeof(seen[k].name), "%s", pw->pw_name);
    else
        snprintf(seen[k].name, sizeof(seen[k].name), "%u", uid);
    snprintf(buf, cap, "%s", seen[k].name);
}

/* The clients' order on the screen: the sort key, largest first (PID: smallest first), then
 * the PID; I inverts it. */
static struct top *sorting;

static double key_of(const struct om_top_client *c, enum sort_key k)
{
    switch (k) {
    case SORT_GPU: return c->gpu_pct;
    case SORT_TIME: return (double)c->u.gpu_ns;
    case SORT_MEM: return (double)c->u.mem;
    case SORT_CALLS: return c->calls_per_s;
    case SORT_KERNELS: return c->kernels_per_s;
    default: return -(double)c->pid;
    }
}

static int by_key(const void *a, const void *b)
{
    const struct om_top_client *x = &sorting->cur->clients[*(const unsigned *)a],
                               *y = &sorting->cur->clients[*(const unsigned *)b];
    double kx = key_of(x, sorting->sort), ky = key_of(y, sorting->sort);
    int r = kx > ky ? -1 : kx < ky ? 1 : x->pid < y->pid ? -1 : x->pid > y->pid ? 1 : 0;
    return sorting->invert ? -r : r;
}

static void build(struct top *t, struct screen *s)
{
    char clock[16], a[24], b[24], c[24], d[24], e[24];
    time_t wall = time(NULL);
    struct tm tm;

    s->n = 0;
    localtime_r(&wall, &tm);
    strftime(clock, sizeof(clock), "%H:%M:%S", &tm);
    put(s, true, "openmps top - %s  refresh %.1f s  sort: %s%s", clock, t->delay,
        sorts[t->sort].label, t->invert ? " (inverted)" : "");
    if (!t->have) {
        put(s, false, "No answer from the daemon: %s", t->why);
        put(s, false, "(retrying every %.1f s)", t->delay);
        return;
    }
    const struct om_top_snapshot *cur = t->cur;
    char servers[TOP_WIDTH] = "";
    for (unsigned i = 0; i < cur->nservers && strlen(servers) < TOP_WIDTH - 80; i++) {
        const struct om_top_server *sv = &cur->servers[i];
        user_text(sv->uid, a, sizeof(a));
        snprintf(servers + strlen(servers), sizeof(servers) - strlen(servers), "  %d %s %s%s%s",
                 sv->pid, a, sv->status,
                 sv->answered ? "" : " (no answer: ", sv->answered ? "" : sv->error);
        if (!sv->answered)
            strcat(servers, ")");
    }
    put(s, false, "Servers: %u%s", cur->nservers, cur->nservers ? servers : "  (none running)");
    uint64_t mem = 0;
    for (unsigned i = 0; i < cur->nclients; i++)
        mem += cur->clients[i].u.mem;
    size_text(mem, a, sizeof(a));
    put(s, false, "Devices: %u  Clients: %u  Device memory: %s", cur->ndevices, cur->nclients, a);
    put(s, false, "%s", "");
    put(s, true, "%-4s %7s  %-24s %7s %6s %10s %9s %8s %8s %8s %8s", "DEV", "SERVER", "NAME",
        "CLIENTS", "GPU%", "GPU TIME", "KERNELS", "MEMORY", "HTOD", "DTOH", "DTOD");
    for (unsigned i = 0; i < cur->ndevices; i++) {
        const struct om_top_device *dv = &cur->devices[i];
        time_text(dv->u.gpu_ns, a, sizeof(a));
        size_text(dv->u.mem, b, sizeof(b));
        size_text(dv->u.htod, c, sizeof(c));
        size_text(dv->u.dtoh, d, sizeof(d));
        size_text(dv->u.dtod, e, sizeof(e));
        put(s, false, "%-4u %7d  %-24.24s %7u %6.1f %10s %9llu %8s %8s %8s %8s", dv->ordinal,
            dv->server_pid, dv->name, dv->clients, dv->gpu_pct, a,
            (unsigned long long)dv->u.kernels, b, c, d, e);
    }
    put(s, false, "%s", "");
    put(s, true, "%7s %-8s %7s %-5s %-7s %5s %6s %10s %8s %8s %8s %8s  %s", "PID", "USER", "SERVER",
        "DEV", "STATE", "SHARE", "GPU%", "GPU TIME", "KERN/s", "CALLS/s", "MEMORY", "PINNED",
        "COMMAND");
    if (!cur->nclients)
        put(s, false, "No clients.");
    for (unsigned i = 0; i < cur->nclients; i++)
        t->order[i] = i;
    sorting = t;
    qsort(t->order, cur->nclients, sizeof(t->order[0]), by_key);
    for (unsigned i = 0; i < cur->nclients; i++) {
        const struct om_top_client *cl = &cur->clients[t->order[i]];
        char devs[24] = "";
        for (unsigned k = 0; k < cl->ndev && strlen(devs) < 16; k++)
            snprintf(devs + strlen(devs), sizeof(devs) - strlen(devs), "%s%u", k ? "," : "",
                     cur->cdev[cl->dev_first + k].ordinal);
        user_text(cl->uid, a, sizeof(a));
        time_text(cl->u.gpu_ns, b, sizeof(b));
        size_text(cl->u.mem, c, sizeof(c));
        size_text(cl->pinned, d, sizeof(d));
        put(s, false, "%7d %-8s %7d %-5s %-7s %5.1f %6.1f %10s %8.1f %8.1f %8s %8s  %s", cl->pid, a,
            cl->server_pid, devs[0] ? devs : "-", cl->state, cl->share, cl->gpu_pct, b,
            cl->kernels_per_s, cl->calls_per_s, c, d, cl->command);
    }
}

/* Asks the daemon for its figures: cur becomes the new answer (prev the last one), or t->why
 * says why there is none. */
static void refresh_figures(struct top *t)
{
    char line[64], *text = NULL;
    bool error = false;
    double at = now_s();

    if (t->server_pid)
        snprintf(line, sizeof(line), "stats --json -p %d", t->server_pid);
    else
        snprintf(line, sizeof(line), "stats --json");
    if (om_frontend_ask_why(line, &text, &error, t->why, sizeof(t->why)) < 0) {
        t->have = t->have_prev = false;
        return;
    }
    struct om_top_snapshot *keep = t->prev;
    t->prev = t->cur;
    t->cur = keep;
    t->have_prev = t->have;
    if (error) {
        snprintf(t->why, sizeof(t->why), "%s", text);
        t->have = false;
    } else {
        t->have = om_top_read(t->cur, text, strlen(text), t->why, sizeof(t->why)) == 0;
    }
    free(text);
    if (t->have)
        om_top_rates(t->cur, t->have_prev ? t->prev : NULL, at - t->cur_at);
    t->cur_at = at;
}

static int batch(struct top *t, struct screen *s)
{
    for (long i = 0; !t->count || i < t->count; i++) {
        if (i) {
            struct timespec ts = {(time_t)t->delay,
                                  (long)((t->delay - (double)(time_t)t->delay) * 1e9)};
            while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
            }
            putchar('\n');
        }
        refresh_figures(t);
        build(t, s);
        for (unsigned k = 0; k < s->n; k++)
            printf("%s\n", s->line[k]);
        if (fflush(stdout) == EOF)
            return 1;
    }
    return t->have ? 0 : 1;
}

#ifdef OM_HAVE_CURSES
static const char footer_text[] =
    "q quit  P GPU%  T GPU time  M memory  R calls/s  K kernels/s  N PID  I invert  < > column";

static void draw(const struct screen *s)
{
    int rows = LINES, cols = COLS;

    erase();
    for (unsigned i = 0; i < s->n && (int)i < rows - 1; i++) {
        if (s->strong[i])
            attron(i == 0 ? A_BOLD : A_REVERSE);
        mvaddnstr((int)i, 0, s->line[i], cols);
        if (s->strong[i] && i > 0)
            for (int x = (int)strlen(s->line[i]); x < cols; x++)
                addch(' '); /* the header's bar across the screen */
        attrset(A_NORMAL);
    }
    attron(A_REVERSE);
    mvaddnstr(rows - 1, 0, footer_text, cols);
    attrset(A_NORMAL);
    refresh();
}

static int interactive(struct top *t, struct screen *s)
{
    if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
        fprintf(stderr, "openmps top: not a terminal (use --once or -b for text)\n");
        return 1;
    }
    SCREEN *scr = newterm(NULL, stdout, stdin);
    if (!scr) {
        const char *term = getenv("TERM");
        fprintf(stderr, "openmps top: cannot use the terminal (TERM=%s)\n", term ? term : "");
        return 1;
    }
    cbreak();
    noecho();
    keypad(stdscr, TRUE);
    curs_set(0);
    long shown = 0;
    bool quit = false;
    while (!quit) {
        refresh_figures(t);
        build(t, s);
        draw(s);
        if (t->count && ++shown >= t->count)
            break;
        double until = now_s() + t->delay;
        for (;;) {
            double left = until - now_s();
            if (left <= 0)
                break;
            timeout((int)(left * 1000) + 1);
            int ch = getch();
            if (ch == ERR)
                continue;
            if (ch == 'q' || ch == 'Q' || ch == KEY_F(10)) {
                quit = true;
                break;
            }
            if (ch == 'I')
                t->invert = !t->invert;
            else if (ch == '<' || ch == ',')
                t->sort = (t->sort + SORT_COUNT - 1) % SORT_COUNT;
            else if (ch == '>' || ch == '.')
                t->sort = (t->sort + 1) % SORT_COUNT;
            else if (ch == ' ')
                break; /* refresh now */
            else
                for (int k = 0; k < SORT_COUNT; k++)
                    if (ch == sorts[k].key) {
                        t->sort = (enum sort_key)k;
                        t->invert = false;
                    }
            build(t, s); /* a key or KEY_RESIZE: the same figures, drawn again */
            draw(s);
        }
    }
    endwin();
    delscreen(scr);
    return 0;
}
#endif

static void top_usage(FILE *f)
{
    fprintf(f,
            "usage: openmps top [-d SECONDS] [-n N] [-s KEY] [-p SERVER_PID] [-b | --once]\n"
            "A live view of the devices and the clients of the daemon of\n"
            "CUDA_MPS_PIPE_DIRECTORY: GPU%% (over the last refresh; first, since the client\n"
            "connected), GPU time, memory, calls and kernels per second, per client and device.\n"
            "  -d SECONDS  time between refreshes (default 1; 0.1 to 3600)\n"
            "  -n N        exit after N refreshes\n"
            "  -s KEY      sort by gpu, time, mem, calls, kernels or pid (default gpu)\n"
            "  -p PID      only that server's devices and clients\n"
            "  -b          batch mode: plain text, one screen per refresh, no terminal needed\n"
            "  --once      batch mode, one screen (-b -n 1)\n"
            "Keys: q quit; P GPU%%, T GPU time, M memory, R calls/s, K kernels/s, N PID;\n"
            "I invert; < > the previous or next column; space refreshes now.\n");
}

int om_cli_top(int argc, char **argv)
{
    static const struct option opts[] = {
        {"help", no_argument, NULL, 'h'},
        {"once", no_argument, NULL, 'o'},
        {"batch", no_argument, NULL, 'b'},
        {"delay", required_argument, NULL, 'd'},
        {"iterations", required_argument, NULL, 'n'},
        {"sort", required_argument, NULL, 's'},
        {NULL, 0, NULL, 0},
    };
    static struct top t;
    static struct screen s;
    int c;
    char *end;

    t = (struct top){.delay = 1.0};
    optind = 0;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+hbd:n:s:p:", opts, NULL)) != -1) {
        switch (c) {
        case 'h': top_usage(stdout); return 0;
        case 'o':
            t.batch = true;
            t.count = 1;
            break;
        case 'b': t.batch = true; break;
        case 'd':
            errno = 0;
            t.delay = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(t.delay >= 0.1 && t.delay <= 3600)) {
                fprintf(stderr, "openmps top: -d \"%s\": expected seconds, 0.1 to 3600\n", optarg);
                return 2;
            }
            break;
        case 'n':
            errno = 0;
            t.count = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || t.count < 1) {
                fprintf(stderr, "openmps top: -n \"%s\": expected a count of 1 or more\n", optarg);
                return 2;
            }
            break;
        case 's': {
            int k = 0;
            while (k < SORT_COUNT && strcmp(optarg, sorts[k].name))
                k++;
            if (k == SORT_COUNT) {
                fprintf(stderr,
                        "openmps top: -s \"%s\": expected gpu, time, mem, calls, kernels or "
                        "pid\n",
                        optarg);
                return 2;
            }
            t.sort = (enum sort_key)k;
            break;
        }
        case 'p': {
            errno = 0;
            long pid = strtol(optarg, &end, 10);
            if (errno || end == optarg || *end || pid < 1 || pid > 0x7fffffff) {
                fprintf(stderr, "openmps top: -p \"%s\": expected a server's PID\n", optarg);
                return 2;
            }
            t.server_pid = (int)pid;
            break;
        }
        default: return om_cli_bad_option("openmps top", argv, c);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "openmps top: unexpected argument \"%s\" (see openmps top --help)\n",
                argv[optind]);
        return 2;
    }
    t.cur = malloc(sizeof(*t.cur));
    t.prev = malloc(sizeof(*t.prev));
    int rc;
    if (!t.cur || !t.prev) {
        fprintf(stderr, "openmps top: out of memory\n");
        rc = 1;
    } else if (t.batch) {
        rc = batch(&t, &s);
    } else {
#ifdef OM_HAVE_CURSES
        rc = interactive(&t, &s);
#else
        fprintf(stderr, "openmps top: this openmps was built without ncurses, so only the "
                        "batch mode (-b, --once) works (Debian: libncurses-dev, then rebuild)\n");
        rc = 1;
#endif
    }
    free(t.cur);
    free(t.prev);
    return rc;
}
