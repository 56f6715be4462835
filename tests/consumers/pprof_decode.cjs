// Decode a gzipped (or plain) profile.proto with npm `pprof-format` and print
// it as JSON: sample types, period, and every sample with its stack (leaf
// first: function name, system name, file, start line, line), values and labels.
//
// usage: node pprof_decode.cjs PROFILE.pb.gz
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

let buf = fs.readFileSync(process.argv[2]);
const gzipped = buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b;
if (gzipped)
	buf = zlib.gunzipSync(buf);
const p = Profile.decode(buf);
const str = (i) => p.stringTable.strings[Number(i)];
const num = (v) => Number(v);
const fns = new Map(p.function.map((f) => [num(f.id), f]));
const locs = new Map(p.location.map((l) => [num(l.id), l]));
const out = {
	gzipped,
	stringTable0: str(0),
	sampleType: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
	periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
	period: num(p.period),
	durationNanos: num(p.durationNanos),
	timeNanos: num(p.timeNanos),
	defaultSampleType: str(p.defaultSampleType),
	mappings: p.mapping.map((m) => ({ id: num(m.id), filename: str(m.filename),
		hasFunctions: !!m.hasFunctions, memoryStart: String(m.memoryStart),
		memoryLimit: String(m.memoryLimit), fileOffset: String(m.fileOffset),
		buildId: str(m.buildId) })),
	// Every location: its mapping, address (as a decimal string: 64 bits) and
	// the functions of its lines (name, system name, file).
	locationDetails: p.location.map((l) => ({ id: num(l.id), mappingId: num(l.mappingId),
		address: String(l.address), functions: l.line.map((ln) => {
			const f = fns.get(num(ln.functionId));
			return f ? [str(f.name), str(f.systemName), str(f.filename)] : null;
		}) })),
	functions: p.function.length,
	locations: p.location.length,
	samples: p.sample.map((s) => ({
		stack: s.locationId.map((id) => {
			const l = locs.get(num(id));
			if (!l)
				throw new Error('sample refers to missing location ' + id);
			return l.line.map((ln) => {
				const f = fns.get(num(ln.functionId));
				if (!f)
					throw new Error('line refers to missing function ' + ln.functionId);
				return { name: str(f.name), systemName: str(f.systemName),
					file: str(f.filename), startLine: num(f.startLine),
					line: num(ln.line) };
			});
		}),
		value: s.value.map(num),
		labels: Object.fromEntries(s.label.map((l) => [str(l.key),
			num(l.str) ? str(l.str) : num(l.num)])),
	})),
};
process.stdout.write(JSON.stringify(out) + '\n');
