/* SPDX-License-Identifier: MIT */
/*
 * fuzz_otlp.c - a spooled profile read back for an OTLP push: the input,
 * gunzip'd when it is gzip (util/gzip.c) and taken as it is otherwise, made
 * an ExportProfilesServiceRequest (output/otlp_from_pprof.c). What comes out
 * must unpack again, and every index in it must hold: the dictionary's
 * tables led by their zero entries, each sample's stack and attributes,
 * each stack's locations, each location's mapping and functions, each
 * string index, within their tables.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "output/otlp.h"
#include "util/gzip.h"
#include "opentelemetry/proto/collector/profiles/v1development/profiles_service.pb-c.h"

#define REQ Opentelemetry__Proto__Collector__Profiles__V1development__ExportProfilesServiceRequest

static void check_str(const REQ *r, int32_t i)
{
	if (i < 0 || (size_t)i >= r->dictionary->n_string_table)
		__builtin_trap();
}

static void check_dictionary(const REQ *r)
{
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = r->dictionary;

	if (!d || !d->n_string_table || d->string_table[0][0] || !d->n_mapping_table ||
	    !d->n_location_table || !d->n_function_table || !d->n_stack_table ||
	    !d->n_attribute_table || !d->n_link_table)
		__builtin_trap();
	for (size_t i = 0; i < d->n_location_table; i++) {
		const Opentelemetry__Proto__Profiles__V1development__Location *l = d->location_table[i];

		if (l->mapping_index < 0 || (size_t)l->mapping_index >= d->n_mapping_table)
			__builtin_trap();
		for (size_t k = 0; k < l->n_lines; k++)
			if (l->lines[k]->function_index < 0 ||
			    (size_t)l->lines[k]->function_index >= d->n_function_table)
				__builtin_trap();
	}
	for (size_t i = 0; i < d->n_function_table; i++) {
		check_str(r, d->function_table[i]->name_strindex);
		check_str(r, d->function_table[i]->filename_strindex);
	}
	for (size_t i = 0; i < d->n_stack_table; i++)
		for (size_t k = 0; k < d->stack_table[i]->n_location_indices; k++)
			if (d->stack_table[i]->location_indices[k] <= 0 ||
			    (size_t)d->stack_table[i]->location_indices[k] >= d->n_location_table)
				__builtin_trap();
	for (size_t i = 1; i < d->n_attribute_table; i++)
		check_str(r, d->attribute_table[i]->key_strindex);
}

static void check_samples(const REQ *r)
{
	const Opentelemetry__Proto__Profiles__V1development__ProfilesDictionary *d = r->dictionary;

	for (size_t i = 0; i < r->n_resource_profiles; i++)
		for (size_t j = 0; j < r->resource_profiles[i]->n_scope_profiles; j++) {
			const Opentelemetry__Proto__Profiles__V1development__ScopeProfiles *sp =
				r->resource_profiles[i]->scope_profiles[j];

			for (size_t k = 0; k < sp->n_profiles; k++) {
				const Opentelemetry__Proto__Profiles__V1development__Profile *p =
					sp->profiles[k];

				check_str(r, p->sample_type->type_strindex);
				check_str(r, p->sample_type->unit_strindex);
				for (size_t s = 0; s < p->n_samples; s++) {
					if (p->samples[s]->stack_index < 0 ||
					    (size_t)p->samples[s]->stack_index >= d->n_stack_table ||
					    p->samples[s]->n_values != 1)
						__builtin_trap();
					for (size_t a = 0; a < p->samples[s]->n_attribute_indices; a++)
						if (p->samples[s]->attribute_indices[a] <= 0 ||
						    (size_t)p->samples[s]->attribute_indices[a] >=
							    d->n_attribute_table)
							__builtin_trap();
				}
			}
		}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct otlp_resource res;
	uint8_t *plain = NULL, *out = NULL;
	size_t plen = 0, olen = 0;
	const uint8_t *in = data;
	REQ *r;
	int rc;

	if (!gzip__decompress(data, size, 1 << 24, &plain, &plen)) {
		in = plain;
		size = plen;
	}
	res.pid = 1;
	res.nattrs = 0;
	res.used = 0;
	otlp_resource__add(&res, "service.name", "fuzz", 0);
	rc = otlp__from_pprof(in, size, &res, 1, &out, &olen);
	if (rc && rc != -EINVAL && rc != -ENOMEM)
		__builtin_trap();
	if (!rc) {
		r = opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__unpack(
			NULL, olen, out);
		if (!r)
			__builtin_trap();
		check_dictionary(r);
		check_samples(r);
		opentelemetry__proto__collector__profiles__v1development__export_profiles_service_request__free_unpacked(
			r, NULL);
	}
	free(out);
	free(plain);
	return 0;
}
