/* args: the part of command-line parsing lfepolld and lfbench share. */
#include "args.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int args_next(int argc, char **argv, int *i, const char *const *with_value, const char *prog,
              struct arg *a, char *err, size_t errlen)
{
    const char *arg = argv[*i];
    const char *eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    bool takes = false;

    a->val = NULL;
    if (eq && (size_t)(eq - arg) < sizeof(a->name)) {
        memcpy(a->name, arg, (size_t)(eq - arg));
        a->name[eq - arg] = '\0';
        a->val = eq + 1;
    } else {
        snprintf(a->name, sizeof(a->name), "%s", arg);
    }
    for (int k = 0; with_value[k]; k++)
        takes |= strcmp(a->name, with_value[k]) == 0;
    if (takes && !a->val) {
        if (*i + 1 >= argc) {
            snprintf(err, errlen, "%s needs a value; see %s --help", a->name, prog);
            return -1;
        }
        a->val = argv[++*i];
    } else if (!takes && a->val) {
        snprintf(err, errlen, "%s takes no value (got '%s')", a->name, a->val);
        return -1;
    }
    return 0;
}

void args_one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

int args_duration_ms(const char *s, double plain_ms, double *ms)
{
    size_t digits = s ? strspn(s, "0123456789.") : 0;
    const char *dot = s ? memchr(s, '.', digits) : NULL;
    double v;

    /* strtod alone would take " 5", "1e3", "0x10", "inf": none is a duration anyone writes */
    if (!digits || (dot && memchr(dot + 1, '.', digits - (size_t)(dot - s) - 1)) ||
        (digits == 1 && dot))
        return -EINVAL;
    v = strtod(s, NULL);
    if (strcmp(s + digits, "ms") == 0)
        ;
    else if (strcmp(s + digits, "s") == 0)
        v *= 1000.0;
    else if (strcmp(s + digits, "m") == 0)
        v *= 60000.0;
    else if (strcmp(s + digits, "h") == 0)
        v *= 3600000.0;
    else if (s[digits] == '\0')
        v *= plain_ms;
    else
        return -EINVAL;
    if (v > 86400000.0)
        return -EINVAL;
    *ms = v;
    return 0;
}
