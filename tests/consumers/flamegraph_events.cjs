// Open a flame graph of a recording at several events (record -e A,B) in
// headless Chromium and report what a person sees: the event choice offered,
// the tree shown at first, what choosing each event shows, and the tooltip
// of a frame hovered there (its unit).
//
// usage: node flamegraph_events.cjs FILE HOVER_FUNCTION
// Prints one JSON object: {errors, blocked, info, options: [..], views: {EVENT:
// {zoomed, drawn: [function names not dimmed], tooltip}}}.
'use strict';
const path = require('path');
const { launch, run } = require('./browser.cjs');

async function view(page, hover) {
	return page.evaluate((fn) => {
		const g = window.flamegraph;
		const drawn = Array.from(document.querySelectorAll('g.f'))
			.filter((e) => !e.classList.contains('dim'))
			.map((e) => +e.getAttribute('data-n'));
		const zoomedNode = Array.from(document.querySelectorAll('g.f'))
			.map((e) => +e.getAttribute('data-n'))
			.sort((a, b) => a - b);
		const names = drawn.map((n) => g.frames[g.frame[n]][0]);
		const hit = drawn.filter((n) => g.frames[g.frame[n]][0] === fn)
			.sort((a, b) => g.weight[b] - g.weight[a])[0];
		let title = null;
		if (hit !== undefined) {
			const el = document.querySelector('g.f[data-n="' + hit + '"] title');
			title = el ? el.textContent : null;
		}
		// the outermost frame drawn undimmed: the view's root
		const root = drawn.reduce((a, n) => (a === undefined ||
			g.parent[n] === -1 || drawn.indexOf(g.parent[n]) < 0 ? n : a), undefined);
		return { zoomed: root === undefined ? null : g.frames[g.frame[root]][0],
			 drawn: names, tooltip: title, count: zoomedNode.length };
	}, hover);
}

run(async () => {
	const [file, hover] = process.argv.slice(2);
	if (!hover)
		throw new Error('usage: flamegraph_events.cjs FILE HOVER_FUNCTION');
	const b = await launch({ viewport: { width: 1200, height: 900 } });
	try {
		const res = { errors: b.errors, blocked: b.blocked, views: {} };
		await b.page.goto('file://' + path.resolve(file));
		await b.page.waitForSelector('g.f', { timeout: 30000 });
		res.info = await b.page.evaluate(() => document.getElementById('fg-info').textContent);
		res.options = await b.page.evaluate(() => Array.from(
			document.querySelectorAll('#fg-event option')).map((o) => o.value));
		res.first = await view(b.page, hover);
		for (const ev of res.options) {
			await b.page.selectOption('#fg-event', ev);
			await b.page.waitForTimeout(100);
			res.views[ev] = await view(b.page, hover);
		}
		return res;
	} finally {
		await b.close();
	}
});
