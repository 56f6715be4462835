// Open one of our HTML views (heatmap, differential flame graph) in headless
// Chromium and report what a person would see of chosen elements: their
// attributes, text, computed background and SVG fill, box, and the
// screenshot's pixel inside each box; optionally the tooltip shown while
// hovering the first element whose text holds a given string.
//
// usage: node page_probe.cjs FILE OUTDIR SPEC_JSON
//   SPEC: {"wait": selector, "select": {name: selector, ...},
//          "pixelAt": "left" | "right" (where in each box the pixel is read),
//          "hover": {"selector": s, "text": t, "tip": tip selector}}
// Prints one JSON object; writes OUTDIR/page.png (the full page).
'use strict';
const path = require('path');
const { launch, run, pixels } = require('./browser.cjs');

function collect(page, sel) {
	return page.evaluate((sel) => Array.from(document.querySelectorAll(sel)).map((e) => {
		const r = (e.querySelector('rect') || e).getBoundingClientRect();
		const attrs = {};
		for (const a of e.attributes)
			attrs[a.name] = a.value;
		const fillEl = e.querySelector('rect');
		return {
			attrs,
			text: e.textContent,
			bg: getComputedStyle(e).backgroundColor,
			fill: fillEl ? fillEl.getAttribute('fill') : null,
			title: (e.querySelector('title') || {}).textContent || null,
			x: r.x + window.scrollX, y: r.y + window.scrollY, width: r.width, height: r.height,
			cells: Array.from(e.children).filter((c) => c.tagName === 'TD').map((c) => ({
				cls: c.className, text: c.textContent, bg: getComputedStyle(c).backgroundColor,
			})),
		};
	}), sel);
}

run(async () => {
	const [file, outdir, specText] = process.argv.slice(2);
	if (!specText)
		throw new Error('usage: page_probe.cjs FILE OUTDIR SPEC_JSON');
	const spec = JSON.parse(specText);
	const b = await launch({ viewport: { width: 1200, height: 900 } });
	try {
		const res = { errors: b.errors, blocked: b.blocked, sel: {} };
		await b.page.goto('file://' + path.resolve(file));
		await b.page.waitForSelector(spec.wait, { timeout: 30000 });
		res.title = await b.page.title();
		for (const [name, sel] of Object.entries(spec.select || {}))
			res.sel[name] = await collect(b.page, sel);
		const shot = await b.page.screenshot({ path: path.join(outdir, 'page.png'),
			fullPage: true });
		for (const list of Object.values(res.sel)) {
			const px = await pixels(b.page, shot, list.map((e) => [
				spec.pixelAt === 'right' ? e.x + e.width - 3 : e.x + 3, e.y + e.height / 2]));
			list.forEach((e, i) => { e.pixel = px[i]; });
		}
		if (spec.hover) {
			const all = await collect(b.page, spec.hover.selector);
			const h = all.find((e) => e.text.includes(spec.hover.text));
			if (!h)
				throw new Error('nothing to hover with ' + spec.hover.text);
			await b.page.mouse.move(h.x + h.width - 3 - (await b.page.evaluate(() =>
				window.scrollX)), h.y + h.height / 2 - (await b.page.evaluate(() =>
				window.scrollY)));
			await b.page.waitForTimeout(100);
			res.tip = await b.page.evaluate((t) => {
				const e = document.querySelector(t);
				return e && e.style.display !== 'none' ? (e.innerText || e.textContent) : null;
			}, spec.hover.tip);
		}
		return res;
	} finally {
		await b.close();
	}
});
