/* Unit tests of file_read: a missing file, a directory, the limit, an empty file, and a pipe (no
 * size to go by: the buffer grows to its end). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h> /* after what it needs */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "file.h"

static char dir[64];
static char path[128];

static int make_dir(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/lfe-test-file-XXXXXX");
    if (!mkdtemp(dir))
        return -1;
    snprintf(path, sizeof(path), "%s/f", dir);
    return 0;
}

static int remove_dir(void **state)
{
    (void)state;
    unlink(path);
    return rmdir(dir);
}

static void put(const char *bytes, size_t n)
{
    FILE *f = fopen(path, "wb");

    assert_non_null(f);
    assert_int_equal(fwrite(bytes, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void test_reads_whole_file(void **state)
{
    char err[256] = "";
    size_t len = 99;
    char *buf;

    (void)state;
    put("ab\0cd", 5);
    buf = file_read(path, 5, &len, err, sizeof(err)); /* exactly the limit */
    assert_non_null(buf);
    assert_int_equal(len, 5);
    assert_memory_equal(buf, "ab\0cd", 6); /* and the NUL after them */
    free(buf);
}

static void test_missing_file(void **state)
{
    char err[256] = "", missing[160];
    size_t len = 99;

    (void)state;
    snprintf(missing, sizeof(missing), "%s/none", dir);
    errno = 0;
    assert_null(file_read(missing, 100, &len, err, sizeof(err)));
    assert_int_equal(errno, ENOENT);
    assert_non_null(strstr(err, "cannot open "));
    assert_non_null(strstr(err, "/none: No such file or directory"));
    assert_int_equal(len, 99); /* untouched on failure */
}

static void test_directory(void **state)
{
    char err[256] = "";
    size_t len = 99;

    (void)state;
    errno = 0;
    assert_null(file_read(dir, FILE_ANY_SIZE, &len, err, sizeof(err)));
    assert_int_equal(errno, EISDIR);
    assert_non_null(strstr(err, "cannot read "));
    assert_non_null(strstr(err, ": Is a directory"));
}

static void test_over_the_limit(void **state)
{
    char err[256] = "";
    size_t len = 99;

    (void)state;
    put("123456", 6);
    errno = 0;
    assert_null(file_read(path, 5, &len, err, sizeof(err)));
    assert_int_equal(errno, EFBIG);
    assert_non_null(strstr(err, "cannot read "));
    assert_non_null(strstr(err, ": over 5 bytes"));
    assert_int_equal(len, 99);
}

static void test_empty_file(void **state)
{
    char err[256] = "";
    size_t len = 99;
    char *buf;

    (void)state;
    put("", 0);
    buf = file_read(path, 0, &len, err, sizeof(err));
    assert_non_null(buf);
    assert_int_equal(len, 0);
    assert_int_equal(buf[0], '\0');
    free(buf);
}

/* A pipe has no size: the first buffer is a guess that grows, and the limit is found by reading
 * one byte past it. Opened by /proc/self/fd/N, as a shell's <(...) hands it over. */
static char *read_pipe(size_t n, size_t max, size_t *len, char *err, size_t errlen)
{
    static char data[20000];
    char name[64];
    int p[2];
    char *buf;

    assert_true(n <= sizeof(data));
    for (size_t i = 0; i < n; i++)
        data[i] = (char)('a' + i % 26);
    assert_int_equal(pipe(p), 0);
    assert_int_equal(write(p[1], data, n), (ssize_t)n); /* under the pipe's 64 KiB */
    close(p[1]);
    snprintf(name, sizeof(name), "/proc/self/fd/%d", p[0]);
    buf = file_read(name, max, len, err, errlen);
    close(p[0]);
    if (buf)
        assert_memory_equal(buf, data, n);
    return buf;
}

static void test_pipe_grows_to_its_end(void **state)
{
    char err[256] = "";
    size_t len = 0;
    char *buf;

    (void)state;
    buf = read_pipe(10000, FILE_ANY_SIZE, &len, err, sizeof(err));
    assert_non_null(buf);
    assert_int_equal(len, 10000);
    assert_int_equal(buf[len], '\0');
    free(buf);
    buf = read_pipe(10000, 10000, &len, err, sizeof(err)); /* the limit exactly */
    assert_non_null(buf);
    assert_int_equal(len, 10000);
    free(buf);
    errno = 0;
    assert_null(read_pipe(10001, 10000, &len, err, sizeof(err)));
    assert_int_equal(errno, EFBIG);
    assert_non_null(strstr(err, ": over 10000 bytes"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reads_whole_file), cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_directory),        cmocka_unit_test(test_over_the_limit),
        cmocka_unit_test(test_empty_file),       cmocka_unit_test(test_pipe_grows_to_its_end),
    };

    return cmocka_run_group_tests(tests, make_dir, remove_dir);
}
