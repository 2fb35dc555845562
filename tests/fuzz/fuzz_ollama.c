/*
 * fuzz_ollama.c - Ollama's and the embedding endpoints' request bodies
 * from the network: api_ollama_parse (generate and chat) and
 * api_embed_parse (all four shapes) must answer every byte string with a
 * request or an error, never crash or leak. libFuzzer target (make fuzz);
 * replay.c runs the kept corpus in make test.
 */
#include <stdint.h>
#include <string.h>

#include "api_embed.h"
#include "api_error.h"
#include "api_ollama.h"
#include "gen_request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct api_ollama_limits lim = {.max_tokens = 2048, .n_ctx = 4096};
	struct api_ollama_extra x;
	struct api_embed_request er;
	struct gen_request req;
	struct api_error e;
	int chat, kind;

	for (chat = 0; chat < 2; chat++) {
		x.chat = chat;
		if (api_ollama_parse((const char *)data, size, &lim, &req, &x, &e) == 0)
			gen_request_free(&req);
	}
	for (kind = API_EMBED_OPENAI; kind <= API_EMBED_OLLAMA_LEGACY; kind++)
		if (api_embed_parse((const char *)data, size, (enum api_embed_kind)kind, &er, &e) == 0)
			api_embed_request_free(&er);
	return 0;
}
