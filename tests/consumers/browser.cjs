// Headless Chromium for the format tests: the system's /usr/bin/chromium
// driven by playwright-core, with no network: every request that is not for a
// local file (or a blob/data URL) is aborted and reported.
'use strict';
const fs = require('fs');
const os = require('os');
const path = require('path');
const { chromium } = require('playwright-core');

const FLAGS = [
	'--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
	'--disable-background-networking', '--disable-component-update', '--disable-sync',
];

async function launch(opts = {}) {
	const udd = fs.mkdtempSync(path.join(os.tmpdir(), 'pyprof-chromium-'));
	const ctx = await chromium.launchPersistentContext(udd, {
		executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
		headless: true,
		args: FLAGS,
		acceptDownloads: true,
		viewport: opts.viewport || { width: 1200, height: 800 },
		timeout: 60000,
	});
	const blocked = [];
	await ctx.route('**/*', (route) => {
		const url = route.request().url();
		if (/^(file|data|blob):/.test(url))
			return route.continue();
		blocked.push(url);
		return route.abort();
	});
	const errors = [];
	const page = ctx.pages()[0] || await ctx.newPage();
	page.on('pageerror', (e) => errors.push('pageerror: ' + e.message));
	page.on('console', (m) => {
		if (m.type() === 'error')
			errors.push('console: ' + m.text());
	});
	page.on('dialog', (d) => {
		errors.push('dialog: ' + d.message());
		d.dismiss().catch(() => {});
	});
	async function close() {
		await ctx.close();
		fs.rmSync(udd, { recursive: true, force: true });
	}
	return { ctx, page, blocked, errors, close };
}

// Run main(), print its result as JSON on stdout; any failure exits 1.
function run(main) {
	main().then((res) => {
		// Exit once written: a pipe takes 64 KB at a time, and exit()
		// right after write() cut a 128 KB result short.
		process.stdout.write(JSON.stringify(res) + '\n', () => process.exit(0));
	}, (e) => {
		process.stderr.write((e && e.stack) || String(e));
		process.stderr.write('\n');
		process.exit(1);
	});
}

// RGBA of the screenshot @png at each point, decoded by the browser itself.
async function pixels(page, png, pts) {
	return page.evaluate(async ({ b64, pts }) => {
		const img = new Image();
		img.src = 'data:image/png;base64,' + b64;
		await img.decode();
		const c = document.createElementNS('http://www.w3.org/1999/xhtml', 'canvas');
		c.width = img.width;
		c.height = img.height;
		const g = c.getContext('2d');
		g.drawImage(img, 0, 0);
		return pts.map((p) => Array.from(g.getImageData(Math.round(p[0]), Math.round(p[1]),
			1, 1).data));
	}, { b64: png.toString('base64'), pts });
}

module.exports = { launch, run, pixels };
