/*
 * fuzz_gguf.c - a model file from untrusted bytes: the GGUF parser, the
 * model loader and the tokenizer built from it must reject anything
 * malformed with an error, never crash or read outside the buffer.
 * libFuzzer target (make fuzz); replay.c runs the kept corpus in make test.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ember.h"
#include "gguf.h"
#include "kernels.h"
#include "model.h"
#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char err[EMBER_ERR_MAX];
	struct gguf g = {0};
	struct model m = {0};
	struct tokenizer *t = NULL;
	/* An exact-size heap copy, so ASan sees any read past the end. */
	uint8_t *buf = malloc(size ? size : 1);
	int32_t ids[64];

	if (buf == NULL)
		return 0;
	memcpy(buf, data, size);
	kern_init();
	if (gguf_open_memory(&g, buf, size, err) == 0) {
		if (model_load(&m, &g, err) == 0)
			model_free(&m);
		if (tokenizer_new(&t, &g, err) == 0) {
			int64_t n = tokenizer_encode(t, "Hello, world! 123", 17, 1, 1, ids, 64);
			char out[256];

			if (n > 0)
				tokenizer_decode(t, ids, (size_t)(n < 64 ? n : 64), 1, out, sizeof(out));
			tokenizer_free(t);
		}
		gguf_close(&g);
	}
	free(buf);
	return 0;
}
