/*
 * api_llamacpp.h - llama-server's native endpoints, for the local tools
 * that speak them:
 *
 *   POST /completion  {"prompt", "n_predict", "temperature", "top_k",
 *       "top_p", "min_p", "stop", "stream", "seed", "repeat_penalty",
 *       "repeat_last_n", "presence_penalty", "frequency_penalty",
 *       "n_probs", "grammar", "json_schema", "cache_prompt", ...}
 *       answered in llama-server's shapes (api_response.h
 *       API_FMT_LLAMACPP). Defaults are llama-server's (temperature 0.8,
 *       top_k 40, top_p 0.95, min_p 0.05), not OpenAI's. Its sampler
 *       knobs Ember lacks (mirostat, typical_p, dynatemp, XTC, DRY,
 *       logit_bias, ignore_eos, samplers, ...) are refused with a 400
 *       naming them unless they hold their neutral value.
 *   POST /infill      the same plus "input_prefix", "input_suffix" and an
 *       optional "prompt" after the middle token: fill-in-the-middle with
 *       the model's FIM tokens (400 naming input_suffix without them);
 *       "input_extra" (repository context) is refused when not empty.
 *   GET /props        default generation settings, slots, model path,
 *       chat template, build.
 *   GET /slots        one entry per slot (read only: which slots are busy
 *       is reported as a count, the first ones marked); POST /slots/{id}
 *       (save/restore/erase) is 403 without an API key and 501 with one.
 *
 * Threads: the loop thread.
 */
#ifndef EMBER_API_LLAMACPP_H
#define EMBER_API_LLAMACPP_H

#include <stdbool.h>
#include <time.h>

#include "api_error.h"
#include "backend.h"
#include "config.h"
#include "gen_request.h"
#include "http.h"

/* Parses a /completion (infill false) or /infill body into `gr`.
 * For /infill, gr->prompt is input_prefix, gr->suffix input_suffix and
 * *middle (malloc'd, may be "") the text after the middle token; NULL
 * for /completion. Returns 0 or EMBER_EINVAL / EMBER_ENOMEM with `e`. */
int api_llamacpp_parse(const char *body, size_t len, int32_t max_tokens, bool infill,
		       struct gen_request *gr, char **middle, struct api_error *e);

/* Turns gr->prompt (the prefix) into the fill-in-the-middle prompt with
 * `suffix` and then `middle` (may be NULL). A model without FIM tokens
 * is a 400 naming `param`. Returns 0 or an error with `e` filled. */
int api_llamacpp_fim(struct backend *b, struct gen_request *gr, const char *suffix,
		     const char *middle, const char *param, struct api_error *e);

/* GET /props. */
void api_llamacpp_props(struct backend *b, const struct config *cfg,
			struct http_req *req);

/* GET /slots and POST /slots/{id}. */
void api_llamacpp_slots(struct backend *b, const struct config *cfg,
			struct http_req *req);
void api_llamacpp_slot_action(const struct config *cfg, struct http_req *req);

#endif
