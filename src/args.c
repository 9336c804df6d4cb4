/* args: the part of command-line parsing lfepolld and lfbench share. */
#include "args.h"

#include <stdbool.h>
#include <stdio.h>
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
