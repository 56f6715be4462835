// Open our flame graph (HTML or SVG) in headless Chromium and report what a
// person would see: every drawn frame with its box, the pixels of the
// screenshot under chosen frames, the tooltip when hovering a frame, what a
// search paints, and what a click zooms to.
//
// usage: node flamegraph_check.cjs FILE HOT_FUNCTION SEARCH_TERM OUTDIR
//   HOT_FUNCTION: the qualname whose frame to hover, pixel-check and zoom into.
// Prints one JSON object; writes OUTDIR/flamegraph.png and flamegraph-search.png.
'use strict';
const path = require('path');
const { launch, run, pixels } = require('./browser.cjs');

async function frames(page) {
	return page.evaluate(() => Array.from(document.querySelectorAll('g.f')).map((g) => {
		const r = g.querySelector('rect').getBoundingClientRect();
		const n = +g.getAttribute('data-n');
		const t = g.querySelector('text');
		return {
			n,
			name: window.flamegraph.frames[window.flamegraph.frame[n]][0],
			full: window.flamegraph.full(n),
			text: t ? t.textContent : '',
			x: r.x, y: r.y, width: r.width, height: r.height,
			fill: g.querySelector('rect').getAttribute('fill'),
			match: g.classList.contains('match'),
			dim: g.classList.contains('dim'),
		};
	}));
}

// A point inside @f's box but right of its label text and clear of the border.
function spot(f) {
	return [f.x + f.width - 4, f.y + f.height / 2];
}

function widest(list, name) {
	return list.filter((f) => f.name === name && !f.dim)
		.sort((a, b) => b.width - a.width)[0];
}

run(async () => {
	const [file, hot, term, outdir] = process.argv.slice(2);
	if (!outdir)
		throw new Error('usage: flamegraph_check.cjs FILE HOT_FUNCTION SEARCH_TERM OUTDIR');
	const b = await launch({ viewport: { width: 1200, height: 900 } });
	try {
		const res = { errors: b.errors, blocked: b.blocked };
		await b.page.goto('file://' + path.resolve(file));
		await b.page.waitForSelector('g.f', { timeout: 30000 });
		res.title = await b.page.title();
		res.info = await b.page.evaluate(() => {
			const e = document.getElementById('fg-info');
			return e ? e.textContent : null;
		});
		res.svgWidth = await b.page.evaluate(() => {
			const s = document.getElementById('fg') || document.documentElement;
			return s.getBoundingClientRect().width;
		});
		res.frames = await frames(b.page);
		// fullPage screenshots need a <body>: size the viewport to an SVG instead.
		const isHtml = await b.page.evaluate(() => !!document.body);
		if (!isHtml) {
			const size = await b.page.evaluate(() => [
				+document.documentElement.getAttribute('width'),
				+document.documentElement.getAttribute('height')]);
			await b.page.setViewportSize({ width: size[0], height: Math.min(size[1], 4000) });
		}
		const shot = await b.page.screenshot({ path: path.join(outdir, 'flamegraph.png'),
			fullPage: isHtml });
		const h = widest(res.frames, hot);
		if (!h)
			throw new Error('no frame for ' + hot);
		res.hot = h;
		// Background: just below the bottom ("all") frame, near the right edge.
		const bottom = Math.max(...res.frames.map((f) => f.y + f.height));
		const right = Math.max(...res.frames.map((f) => f.x + f.width));
		const white = [right - 5, bottom + 2];
		[res.hotPixel, res.backgroundPixel] = await pixels(b.page, shot, [spot(h), white]);

		// Hover: the tooltip (HTML) or the details line (SVG) names the frame.
		await b.page.mouse.move(...spot(h));
		await b.page.waitForTimeout(100);
		res.tooltip = await b.page.evaluate(() => {
			const t = document.getElementById('fg-tip');
			if (t && t.style.display !== 'none')
				return t.innerText || t.textContent;
			const d = document.getElementById('fg-details');
			return d ? d.textContent : null;
		});
		await b.page.mouse.move(1, 1);

		// Search: through the page's own box for HTML, the API for SVG
		// (whose "Search" button opens a prompt()).
		if (isHtml)
			await b.page.fill('#fg-search', term);
		else
			await b.page.evaluate((t) => window.flamegraph.search(t), term);
		await b.page.waitForTimeout(100);
		res.searched = await frames(b.page);
		res.matchedText = await b.page.evaluate(() => {
			const m = document.getElementById('fg-matched');
			return m ? m.textContent : null;
		});
		const shot2 = await b.page.screenshot({ path: path.join(outdir, 'flamegraph-search.png'),
			fullPage: isHtml });
		res.searchPixels = await pixels(b.page, shot2, res.searched.map(spot));
		if (isHtml)
			await b.page.fill('#fg-search', '');
		else
			await b.page.evaluate(() => window.flamegraph.search(''));

		// Zoom: click the hot frame's box, then reset.
		const before = (await frames(b.page)).filter((f) => f.name === hot && !f.dim);
		const target = before.sort((a, b2) => b2.width - a.width)[0];
		await b.page.mouse.click(...spot(target));
		await b.page.waitForTimeout(100);
		const after = await frames(b.page);
		res.zoomed = after.find((f) => f.n === target.n);
		res.zoomedCount = after.length;
		await b.page.evaluate(() => document.getElementById('fg-reset')
			.dispatchEvent(new MouseEvent('click', { bubbles: true })));
		await b.page.waitForTimeout(100);
		res.reset = (await frames(b.page)).find((f) => f.n === target.n);
		return res;
	} finally {
		await b.close();
	}
});
