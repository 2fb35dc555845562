/*
 * fuzz_request.c - request bodies from the network: the OpenAI chat and
 * completion parsers must answer every byte string with a request or an
 * error, never crash or leak. libFuzzer target (make fuzz); replay.c runs
 * the kept corpus in make test.
 */
#include <stdint.h>
#include <string.h>

#include "api_error.h"
#include "api_openai.h"
#include "gen_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_limits lim = {.max_tokens = 2048};
	struct gen_request req;
	struct api_error e;

	memset(&req, 0, sizeof(req));
	if (api_openai_parse_chat((const char *)data, size, &lim, &req, &e) == 0)
		gen_request_free(&req);
	memset(&req, 0, sizeof(req));
	if (api_openai_parse_completion((const char *)data, size, &lim, &req, &e) == 0)
		gen_request_free(&req);
	return 0;
}
