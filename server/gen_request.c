/* gen_request.c - the plain request struct. See gen_request.h. */
#include "gen_request.h"

#include <stdlib.h>
#include <string.h>

void gen_request_init(struct gen_request *r, enum gen_kind kind,
		      int32_t max_tokens)
{
	memset(r, 0, sizeof(*r));
	r->kind = kind;
	r->max_tokens = max_tokens;
	r->temperature = 1.0f;
	r->top_p = 1.0f;
	r->repeat_penalty = 1.0f;
	r->repeat_last_n = 64;
	r->parallel_tool_calls = true;
	r->n = 1;
}

size_t gen_request_n_prompts(const struct gen_request *r)
{
	return r->prompts ? r->n_prompts : 1;
}

void gen_request_free(struct gen_request *r)
{
	size_t i;

	if (r == NULL)
		return;
	free(r->model);
	for (i = 0; i < r->n_messages; i++) {
		free(r->messages[i].content);
		free(r->messages[i].tool_calls);
		free(r->messages[i].tool_call_id);
	}
	free(r->messages);
	free(r->prompt);
	for (i = 0; r->prompts && i < r->n_prompts; i++) {
		free(r->prompts[i].text);
		free(r->prompts[i].ids);
	}
	free(r->prompts);
	free(r->grammar);
	free(r->tools);
	free(r->suffix);
	free(r->logit_bias);
	free(r->tool_name);
	for (i = 0; i < r->n_stop; i++)
		free(r->stop[i]);
	memset(r, 0, sizeof(*r));
}

const char *gen_role_name(enum gen_role role)
{
	switch (role) {
	case GEN_ROLE_SYSTEM: return "system";
	case GEN_ROLE_USER: return "user";
	case GEN_ROLE_ASSISTANT: return "assistant";
	case GEN_ROLE_TOOL: return "tool";
	}
	return "user";
}
