/*
 * fuzz_request.c - request bodies from the network: the OpenAI chat and
 * completion parsers (with the field audit) and llama-server's /completion
 * and /infill parser must answer every byte string with a request or an
 * error, never crash or leak. libFuzzer target (make fuzz); replay.c runs
 * the kept corpus in make test.
 */
#include <stdint.h>
#include <string.h>

#include <stdlib.h>

#include "api_error.h"
#include "api_llamacpp.h"
#include "api_openai.h"
#include "gen_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_limits lim = {.max_tokens = 2048};
	struct gen_request req;
	struct api_error e;
	char *middle = NULL;
	int infill;

	memset(&req, 0, sizeof(req));
	if (api_openai_parse_chat((const char *)data, size, &lim, &req, &e) == 0)
		gen_request_free(&req);
	memset(&req, 0, sizeof(req));
	if (api_openai_parse_completion((const char *)data, size, &lim, &req, &e) == 0)
		gen_request_free(&req);
	for (infill = 0; infill < 2; infill++) {
		if (api_llamacpp_parse((const char *)data, size, 2048, infill, &req, &middle,
				       &e) == 0) {
			gen_request_free(&req);
			free(middle);
		}
	}
	return 0;
}
