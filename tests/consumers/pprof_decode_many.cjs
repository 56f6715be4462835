// Decode many gzipped (or plain) profile.proto files with npm `pprof-format`
// in one run (tests/test_agent.py gets dozens per test; one node start each
// would cost more than the test). Prints one JSON array, one entry per file,
// in the order given: sample types, period, time and duration (as decimal
// strings: 64 bits), and every sample with its stack (leaf first: function
// name, file, line), values and labels. A file that does not decode is an
// entry {"file", "error"}, so one bad profile names itself.
//
// usage: node pprof_decode_many.cjs LIST   (LIST: one path a line)
'use strict';
const fs = require('fs');
const zlib = require('zlib');
const { Profile } = require('pprof-format');

function decode(path) {
	let buf = fs.readFileSync(path);
	const gzipped = buf.length >= 2 && buf[0] === 0x1f && buf[1] === 0x8b;
	if (gzipped)
		buf = zlib.gunzipSync(buf);
	const p = Profile.decode(buf);
	const str = (i) => {
		const s = p.stringTable.strings[Number(i)];
		if (s === undefined)
			throw new Error('string index ' + i + ' out of the table');
		return s;
	};
	const num = (v) => Number(v);
	const fns = new Map(p.function.map((f) => [num(f.id), f]));
	const locs = new Map(p.location.map((l) => [num(l.id), l]));
	return {
		file: path,
		gzipped,
		stringTable0: str(0),
		sampleType: p.sampleType.map((t) => [str(t.type), str(t.unit)]),
		periodType: p.periodType ? [str(p.periodType.type), str(p.periodType.unit)] : null,
		period: num(p.period),
		timeNanos: String(p.timeNanos),
		durationNanos: String(p.durationNanos),
		comments: (p.comment || []).map((i) => str(i)),
		samples: p.sample.map((s) => ({
			stack: s.locationId.map((id) => {
				const l = locs.get(num(id));
				if (!l)
					throw new Error('sample refers to missing location ' + id);
				return l.line.map((ln) => {
					const f = fns.get(num(ln.functionId));
					if (!f)
						throw new Error('line refers to missing function ' +
							ln.functionId);
					return [str(f.name), str(f.filename), num(ln.line)];
				});
			}),
			value: s.value.map(num),
			labels: Object.fromEntries(s.label.map((l) => [str(l.key),
				num(l.str) ? str(l.str) : num(l.num)])),
		})),
	};
}

const paths = fs.readFileSync(process.argv[2], 'utf8').split('\n').filter((l) => l);
const out = paths.map((path) => {
	try {
		return decode(path);
	} catch (e) {
		return { file: path, error: String(e && e.stack || e) };
	}
});
process.stdout.write(JSON.stringify(out) + '\n');
