/*
 * replay.c - runs a fuzz target's LLVMFuzzerTestOneInput on files, for
 * compilers without libFuzzer: `make test` replays every kept corpus file
 * (tests/fuzz/corpus/<target>/, crashes found once stay there forever) so
 * a fixed crash cannot come back. Usage: replay FILE...
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
	int i, n = 0;

	for (i = 1; i < argc; i++) {
		FILE *f = fopen(argv[i], "rb");
		uint8_t *buf = NULL;
		long len;

		if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (len = ftell(f)) < 0 ||
		    fseek(f, 0, SEEK_SET) != 0 || (buf = malloc((size_t)len + 1)) == NULL ||
		    fread(buf, 1, (size_t)len, f) != (size_t)len) {
			fprintf(stderr, "replay: cannot read %s\n", argv[i]);
			return 1;
		}
		fclose(f);
		LLVMFuzzerTestOneInput(buf, (size_t)len);
		free(buf);
		n++;
	}
	printf("replay: %d input(s) ran\n", n);
	return 0;
}
