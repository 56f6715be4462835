// Import a profile into the real speedscope app (npm package `speedscope`,
// loaded from its local index.html in headless Chromium, the way its own CLI
// does it), then press its Export button and save what speedscope exports:
// the profile as speedscope understood it, in its own file format.
//
// usage: node speedscope_import.cjs PROFILE NAME OUTDIR
//   NAME is the file name speedscope sees; it picks the importer
//   (x.linux-perf.txt: perf script; x.speedscope.json: file format; x.pb.gz:
//   pprof). Writes OUTDIR/exported.json and OUTDIR/speedscope.png; prints
//   {"exported": path, "screenshot": path, "errors": [...], "blocked": [...]}.
'use strict';
const fs = require('fs');
const path = require('path');
const { launch, run } = require('./browser.cjs');

run(async () => {
	const [input, name, outdir] = process.argv.slice(2);
	if (!outdir)
		throw new Error('usage: speedscope_import.cjs PROFILE NAME OUTDIR');
	const index = require.resolve('speedscope/dist/release/index.html');
	const loader = path.join(outdir, 'load-profile.js');
	const b64 = fs.readFileSync(input).toString('base64');
	fs.writeFileSync(loader, 'speedscope.loadFileFromBase64(' + JSON.stringify(name) + ', ' +
		JSON.stringify(b64) + ')');
	const b = await launch();
	try {
		await b.page.goto('file://' + index + '#localProfilePath=' + loader);
		const exp = b.page.getByText('Export', { exact: false }).first();
		await exp.waitFor({ timeout: 30000 });
		// The profile is loaded once its name shows in the toolbar.
		await b.page.waitForFunction(() => document.querySelectorAll('canvas').length > 0,
			null, { timeout: 30000 });
		await b.page.waitForTimeout(300);
		const shot = path.join(outdir, 'speedscope.png');
		await b.page.screenshot({ path: shot });
		const [dl] = await Promise.all([
			b.page.waitForEvent('download', { timeout: 30000 }),
			exp.click(),
		]);
		const out = path.join(outdir, 'exported.json');
		await dl.saveAs(out);
		const title = await b.page.title();
		return { exported: out, screenshot: shot, title, errors: b.errors, blocked: b.blocked };
	} finally {
		await b.close();
	}
});
