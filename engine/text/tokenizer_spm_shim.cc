// tokenizer_spm_shim.cc - libsentencepiece behind a C API (see
// tokenizer_spm_shim.h). The only C++ in the engine: keep it this small.
#include "tokenizer_spm_shim.h"

#include <new>
#include <string>
#include <vector>

#include <sentencepiece_processor.h>

extern "C" {
#include "ember.h"
}

struct spm {
	sentencepiece::SentencePieceProcessor proc;
};

int spm_new(struct spm **out, const void *proto, size_t len, char *err)
{
	*out = nullptr;
	try {
		spm *s = new spm;
		auto st = s->proc.LoadFromSerializedProto(
			std::string_view(static_cast<const char *>(proto), len));
		if (!st.ok()) {
			ember_seterr(err, EMBER_EFORMAT, "sentencepiece: %s", st.message());
			delete s;
			return EMBER_EFORMAT;
		}
		*out = s;
		return 0;
	} catch (const std::bad_alloc &) {
		return ember_seterr(err, EMBER_ENOMEM, "sentencepiece: out of memory");
	} catch (...) {
		return ember_seterr(err, EMBER_EFORMAT, "sentencepiece: model rejected");
	}
}

void spm_free(struct spm *s)
{
	delete s;
}

int64_t spm_encode(const struct spm *s, const char *text, size_t len, int space_prefix, int32_t *ids,
		   size_t cap)
{
	try {
		std::string in;
		std::vector<int> v;

		in.reserve(len + 1);
		if (space_prefix)
			in.push_back(' ');
		in.append(text, len);
		if (!s->proc.Encode(in, &v).ok())
			return EMBER_EINVAL;
		for (size_t i = 0; i < v.size() && i < cap; i++)
			ids[i] = v[i];
		return static_cast<int64_t>(v.size());
	} catch (const std::bad_alloc &) {
		return EMBER_ENOMEM;
	} catch (...) {
		return EMBER_EINVAL;
	}
}

int32_t spm_n_pieces(const struct spm *s)
{
	return s->proc.GetPieceSize();
}

int spm_piece(const struct spm *s, int32_t id, const char **ptr, size_t *len)
{
	if (id < 0 || id >= s->proc.GetPieceSize())
		return -1;
	const std::string &p = s->proc.IdToPiece(id);
	*ptr = p.data();
	*len = p.size();
	return 0;
}
