/*
 * convert_rope.c - a checkpoint's rope scaling and attention variants as
 * GGUF carries them (convert_arch.h: convert_arch_rope).
 *
 * config.json's rope_scaling becomes what llama.cpp's converter writes:
 *   llama3    rope_freqs.weight, rope_dim/2 divisors of the frequencies
 *   linear    <arch>.rope.scaling.type "linear", .factor
 *   longrope  rope_factors_long/short.weight and rope.scaling.attn_factor
 * Any other type, or one the architecture's entry does not list, is
 * refused by name: a converted file must never run without it. Gemma's
 * sliding-layer pattern and soft-capping are checked here too, since the
 * GGUF carries no pattern key and the engine applies a fixed one.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convert_arch.h"
#include "ember.h"

void convert_arch_rope_free(struct conv_rope *r)
{
	free(r->freqs);
	free(r->longf);
	free(r->shortf);
	memset(r, 0, sizeof(*r));
}

/* A number under `key` of the rope_scaling object: 0 or EMBER_EFORMAT. */
static int rs_number(json_t *rs, const char *key, double *out, char *err)
{
	json_t *v = json_object_get(rs, key);

	if (!json_is_number(v) || !(json_number_value(v) > 0.0) || json_number_value(v) > 1e30)
		return ember_seterr(err, EMBER_EFORMAT, "config.json: rope_scaling.%s is missing or "
				    "not a positive number", key);
	*out = json_number_value(v);
	return 0;
}

/*
 * Llama 3's scaling as divisors (llama.cpp's rope_freqs): with wavelength
 * w = 2 pi / f_i of f_i = theta^(-2i/dim), high-frequency dims (w < L/high)
 * keep f_i (1), low ones (w > L/low) are divided by factor, those between
 * blend: f_i ((1 - s)/factor + s), s = (L/w - low) / (high - low). The
 * base frequencies are float32 as llama.cpp's converter computes them.
 */
static int rope_llama3(json_t *rs, const struct conv_hparams *hp, struct conv_rope *r, char *err)
{
	double factor, low, high, L;
	uint32_t i;
	int rc;

	if ((rc = rs_number(rs, "factor", &factor, err)) < 0 ||
	    (rc = rs_number(rs, "low_freq_factor", &low, err)) < 0 ||
	    (rc = rs_number(rs, "high_freq_factor", &high, err)) < 0 ||
	    (rc = rs_number(rs, "original_max_position_embeddings", &L, err)) < 0)
		return rc;
	if (!(high > low))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: rope_scaling high_freq_factor "
				    "must exceed low_freq_factor");
	r->freqs = malloc(r->n * sizeof(float));
	if (!r->freqs)
		return ember_seterr(err, EMBER_ENOMEM, "rope_freqs");
	/* In float32 throughout, as llama.cpp's converter computes them
	 * (torch tensors), so the tables are bit for bit the same. */
	for (i = 0; i < r->n; i++) {
		float f = 1.0f / powf(hp->rope_theta, (float)(2 * i) / (float)hp->rope_dim);
		float w = (float)(2.0 * M_PI) / f, s;

		if (w < (float)(L / high)) {
			r->freqs[i] = 1.0f;
		} else if (w > (float)(L / low)) {
			r->freqs[i] = (float)factor;
		} else {
			s = ((float)L / w - (float)low) / (float)(high - low);
			r->freqs[i] = 1.0f / ((1.0f - s) / (float)factor + s);
		}
	}
	return 0;
}

/* rope_scaling[key]: rope_dim/2 positive numbers, copied to *out. */
static int rs_factors(json_t *rs, const char *key, uint32_t n, float **out, char *err)
{
	json_t *a = json_object_get(rs, key), *v;
	size_t i;

	if (!json_is_array(a) || json_array_size(a) != n)
		return ember_seterr(err, EMBER_EFORMAT, "config.json: rope_scaling.%s must be %u "
				    "numbers (rotary dims / 2)", key, n);
	*out = malloc(n * sizeof(float));
	if (!*out)
		return ember_seterr(err, EMBER_ENOMEM, "rope factors");
	json_array_foreach(a, i, v) {
		if (!json_is_number(v) || !(json_number_value(v) > 0.0))
			return ember_seterr(err, EMBER_EFORMAT, "config.json: rope_scaling.%s[%zu] is "
					    "not a positive number", key, i);
		(*out)[i] = (float)json_number_value(v);
	}
	return 0;
}

/* Phi-3's longrope: both factor lists, and cos/sin scaled by
 * attention_factor, by default sqrt(1 + ln(M/O) / ln(O)) (1 when M <= O). */
static int rope_longrope(json_t *rs, const struct conv_hparams *hp, struct conv_rope *r, char *err)
{
	json_t *af = json_object_get(rs, "attention_factor");
	double M = hp->n_ctx, O = hp->orig_ctx;
	int rc;

	if ((rc = rs_factors(rs, "long_factor", r->n, &r->longf, err)) < 0 ||
	    (rc = rs_factors(rs, "short_factor", r->n, &r->shortf, err)) < 0)
		return rc;
	if (af && !json_is_null(af)) {
		if (!json_is_number(af) || !(json_number_value(af) > 0.0))
			return ember_seterr(err, EMBER_EFORMAT, "config.json: bad "
					    "rope_scaling.attention_factor");
		r->attn_factor = (float)json_number_value(af);
	} else {
		r->attn_factor = M <= O || O <= 1.0 ? 1.0f
						    : (float)sqrt(1.0 + log(M / O) / log(O));
	}
	return 0;
}

/* Gemma's sliding layers: config.json must describe the pattern the
 * engine applies (layer i sliding iff (i + 1) % period != 0). */
static int check_swa(json_t *config, const struct conv_arch *a, const struct conv_hparams *hp,
		     char *err)
{
	json_t *pat = json_object_get(config, "sliding_window_pattern");
	json_t *types = json_object_get(config, "layer_types"), *v;
	size_t i;

	if (hp->n_swa == 0)
		return ember_seterr(err, EMBER_EFORMAT, "config.json: %s needs sliding_window",
				    a->hf_arch);
	if (pat && !json_is_null(pat) &&
	    (!json_is_integer(pat) || json_integer_value(pat) != (json_int_t)a->swa_period))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: sliding_window_pattern "
				    "other than %u is not supported for %s", a->swa_period,
				    a->hf_arch);
	if (types && !json_is_null(types)) {
		if (!json_is_array(types) || json_array_size(types) != hp->n_layer)
			return ember_seterr(err, EMBER_EFORMAT, "config.json: layer_types must list "
					    "%u layers", hp->n_layer);
		json_array_foreach(types, i, v) {
			const char *want = (i + 1) % a->swa_period != 0 ? "sliding_attention"
									: "full_attention";

			if (!json_is_string(v) || strcmp(json_string_value(v), want) != 0)
				return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: "
						    "layer_types[%zu] is not %s: that layer "
						    "pattern is not supported for %s", i, want,
						    a->hf_arch);
		}
	}
	return 0;
}

static int has_key(const struct conv_arch *a, enum conv_hp src)
{
	size_t i;

	for (i = 0; i < a->n_keys; i++)
		if (a->keys[i].src == src)
			return 1;
	return 0;
}

int convert_arch_rope(json_t *config, const struct conv_arch *a, const struct conv_hparams *hp,
		      struct conv_rope *r, char *err)
{
	json_t *rs = json_object_get(config, "rope_scaling"), *t;
	const char *type;
	double factor;
	int rc;

	memset(r, 0, sizeof(*r));
	r->n = hp->rope_dim / 2;
	if (a->swa_period && (rc = check_swa(config, a, hp, err)) < 0)
		return rc;
	if ((hp->attn_cap > 0.0f || hp->final_cap > 0.0f) && !has_key(a, HP_ATTN_CAP))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: logit soft-capping is not "
				    "supported for %s", a->hf_arch);
	/* Qwen2/3's optional window on the upper layers: no entry has it. */
	if (json_is_true(json_object_get(config, "use_sliding_window")))
		return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: use_sliding_window is not "
				    "supported for %s", a->hf_arch);
	if (rs == NULL || json_is_null(rs))
		return 0;
	t = json_object_get(rs, "rope_type");
	if (!json_is_string(t))
		t = json_object_get(rs, "type");
	if (!json_is_object(rs) || !json_is_string(t))
		return ember_seterr(err, EMBER_EFORMAT, "config.json: rope_scaling has no type");
	type = json_string_value(t);
	if (strcmp(type, "default") == 0)
		return 0;
	if (strcmp(type, "llama3") == 0 && (a->rope_ok & CR_LLAMA3))
		return rope_llama3(rs, hp, r, err);
	if (strcmp(type, "linear") == 0 && (a->rope_ok & CR_LINEAR)) {
		if ((rc = rs_number(rs, "factor", &factor, err)) < 0)
			return rc;
		if (factor < 1.0)
			return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: linear rope "
					    "factor %g below 1 is not supported", factor);
		r->linear_factor = (float)factor;
		return 0;
	}
	if ((strcmp(type, "longrope") == 0 || strcmp(type, "su") == 0) &&
	    (a->rope_ok & CR_LONGROPE))
		return rope_longrope(rs, hp, r, err);
	return ember_seterr(err, EMBER_EUNSUPPORTED, "config.json: rope_scaling type '%s' is not "
			    "supported for %s", type, a->hf_arch);
}
