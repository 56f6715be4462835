(function () {
'use strict';
var NS = 'http://www.w3.org/2000/svg';
var doc = document;
var D = JSON.parse(doc.getElementById('fg-data').textContent);
var html = !!doc.body;
var ROW = 17, PAD = html ? 4 : 44, FOOT = html ? 4 : 30, CH = 7.3;
var F = D.frames, V = D.nodes, n = V.length / 4;
var frame = [], parent = [], weight = [], count = [], kids = [], depth = [], x = [];
var i, maxd = 0;
for (i = 0; i < n; i++) {
	frame[i] = V[4 * i];
	parent[i] = V[4 * i + 1];
	weight[i] = V[4 * i + 2];
	count[i] = V[4 * i + 3];
	kids[i] = [];
	if (parent[i] >= 0)
		kids[parent[i]].push(i);
}
// A differential view (report --diff): frames are functions (merged by name
// and file, so no line), and D.base holds each node's weight in BASE.
var base = D.base || null, baseTotal = D.baseTotal || 1;
function label(k) {
	var f = F[frame[k]];
	if (f[3] !== 0)
		return f[0];
	return f[0] + ' (' + f[1].replace(/^.*\//, '') + (base ? '' : ':' + f[2]) + ')';
}
function full(k) {
	var f = F[frame[k]];
	if (f[3] === 0)
		return f[0] + ' ' + f[1] + (base ? '' : ':' + f[2]);
	return f[1] ? f[0] + ' ' + f[1] : f[0];
}
for (i = 0; i < n; i++)
	kids[i].sort(function (a, b) {
		var la = label(a), lb = label(b);
		return la < lb ? -1 : la > lb ? 1 : 0;
	});
(function layout() {
	var st = [0], k, c, off;
	depth[0] = 0;
	x[0] = 0;
	while (st.length) {
		k = st.pop();
		off = x[k];
		for (c = 0; c < kids[k].length; c++) {
			var j = kids[k][c];
			x[j] = off;
			off += weight[j];
			depth[j] = depth[k] + 1;
			if (depth[j] > maxd)
				maxd = depth[j];
			st.push(j);
		}
	}
})();
var root = doc.getElementById(html ? 'fg' : 'fg-frames');
var svg = html ? root : doc.documentElement;
var tip = doc.getElementById('fg-tip');
var details = doc.getElementById('fg-details');
var matchedEl = doc.getElementById('fg-matched');
var zoomed = 0, matched = null, term = '';
var total = weight[0] || 1, totalCount = count[0] || 1;
// Change of a node's share of all the time, NEW minus BASE; colours scale
// with the largest change.
function delta(k) {
	return weight[k] / total - base[k] / baseTotal;
}
var maxDelta = 0;
for (i = 0; base && i < n; i++)
	maxDelta = Math.max(maxDelta, Math.abs(delta(i)));

function hash(s) {
	var h = 2166136261, k;
	for (k = 0; k < s.length; k++) {
		h ^= s.charCodeAt(k);
		h = Math.imul(h, 16777619) >>> 0;
	}
	return h;
}
function color(k) {
	var f = F[frame[k]];
	if (matched && matched[k])
		return 'rgb(230,0,230)';
	if (f[3] === 16)
		return 'rgb(215,215,215)';
	if (base) {
		// Red where the share grew, blue where it shrank, white unchanged.
		var d = maxDelta ? delta(k) / maxDelta : 0, v = Math.round(255 - 200 * Math.abs(d));
		return d >= 0 ? 'rgb(255,' + v + ',' + v + ')' : 'rgb(' + v + ',' + v + ',255)';
	}
	var h = hash(f[0]), a = (h & 255) / 255, b = ((h >>> 8) & 255) / 255;
	var c = ((h >>> 16) & 255) / 255;
	if (f[3] === 4)
		return 'rgb(' + (200 + Math.round(30 * c)) + ',' + (110 + Math.round(60 * a)) +
			',' + Math.round(40 * b) + ')';
	if (f[3] === 5)
		return 'rgb(' + (185 + Math.round(50 * c)) + ',' + (185 + Math.round(50 * a)) +
			',' + (40 + Math.round(40 * b)) + ')';
	if (f[3] !== 0)
		return 'rgb(190,190,205)';
	return 'rgb(' + (205 + Math.round(50 * c)) + ',' + Math.round(230 * a) + ',' +
		Math.round(55 * b) + ')';
}
function pct(v, of) {
	return (100 * v / of).toFixed(2) + '%';
}
// Several events (-e A,B): each stack starts at its event's frame "[A]",
// whose tree is in A's unit; the page shows one event at a time.
var events = D.events || null, evNode = {};
function eventAt(k) {
	var f = F[frame[k]][0];
	if (f.charAt(0) === '[' && events.indexOf(f.slice(1, -1)) >= 0)
		return f.slice(1, -1);
	return null;
}
function eventNode(k) {
	for (; k > 0; k = parent[k])
		if (eventAt(k) !== null)
			return k;
	return -1;
}
function unitOf(k) {
	if (!events)
		return D.unit;
	var e = eventNode(k);
	if (e < 0)
		return 'samples';
	e = eventAt(e);
	return e === 'cpu-clock' || e === 'task-clock' ? 'ns' : e;
}
function fmtTime(ns, unit) {
	unit = unit || D.unit;
	if (unit === 'bytes')
		return fmtBytes(ns);
	if (unit !== 'ns')
		return ns + ' ' + unit;
	if (ns >= 1e9)
		return (ns / 1e9).toFixed(3) + ' s';
	if (ns >= 1e6)
		return (ns / 1e6).toFixed(2) + ' ms';
	return (ns / 1e3).toFixed(1) + ' us';
}
function fmtBytes(b) {
	var units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'], i = 0;
	while (b >= 1024 && i < units.length - 1) {
		b /= 1024;
		i++;
	}
	return (i ? b.toFixed(1) : b) + ' ' + units[i];
}
// The weight's name after its amount: CPU time, or nothing for events and bytes.
function amount(w, k) {
	var u = k === undefined ? D.unit : unitOf(k);
	return fmtTime(w, u) + (u === 'ns' ? ' CPU' : '');
}
function info(k) {
	var e = events ? eventNode(k) : -1;
	var s = count[k] + (count[k] === 1 ? ' sample' : ' samples') + ' (' +
		(e >= 0 ? pct(weight[k], weight[e]) + ' of ' + eventAt(e) :
		 pct(weight[k], total) + ' of all');
	if (zoomed)
		s += ', ' + pct(weight[k], weight[zoomed]) + ' of zoomed';
	s += '), ' + amount(weight[k], k);
	if (base) {
		var d = 100 * delta(k);
		s += '\nbase ' + pct(base[k], baseTotal) + ', new ' + pct(weight[k], total) +
			', change ' + (d >= 0 ? '+' : '') + d.toFixed(2) + ' points';
	}
	return s;
}
function width() {
	if (html)
		return Math.max(200, root.parentNode.clientWidth - 16);
	return +svg.getAttribute('width');
}
function el(name, attrs, parentEl) {
	var e = doc.createElementNS(NS, name), a;
	for (a in attrs)
		e.setAttribute(a, attrs[a]);
	parentEl.appendChild(e);
	return e;
}
function draw(k, px, pw, H, dim) {
	var y = H - FOOT - (depth[k] + 1) * ROW;
	var cls = 'f' + (dim ? ' dim' : '') + (matched && matched[k] ? ' match' : '');
	var g = el('g', { 'class': cls, 'data-n': k }, root);
	el('rect', { x: px.toFixed(2), y: y, width: Math.max(pw - 0.5, 0.1).toFixed(2),
		height: ROW - 1, rx: 2, fill: color(k) }, g);
	var t = el('title', {}, g);
	t.textContent = full(k) + '\n' + info(k);
	var chars = Math.floor((pw - 6) / CH);
	if (chars >= 3) {
		var s = label(k);
		if (s.length > chars)
			s = s.slice(0, chars - 2) + '..';
		el('text', { x: (px + 3).toFixed(2), y: y + 12 }, g).textContent = s;
	}
}
function render() {
	var W = width(), H = PAD + (maxd + 1) * ROW + FOOT, scale, x0, st, k, c;
	while (root.firstChild)
		root.removeChild(root.firstChild);
	if (html) {
		svg.setAttribute('width', W);
		svg.setAttribute('height', H);
		H = H - PAD;
	} else {
		H = +svg.getAttribute('height');
	}
	x0 = x[zoomed];
	scale = W / (weight[zoomed] || 1);
	for (k = parent[zoomed]; k >= 0; k = parent[k])
		draw(k, 0, W, H, true);
	st = [zoomed];
	while (st.length) {
		k = st.pop();
		var pw = weight[k] * scale;
		if (pw < 0.3)
			continue;
		draw(k, (x[k] - x0) * scale, pw, H, false);
		for (c = 0; c < kids[k].length; c++)
			st.push(kids[k][c]);
	}
	showMatched();
}
function showMatched() {
	if (!matchedEl)
		return;
	if (!matched) {
		matchedEl.textContent = '';
		return;
	}
	var sum = 0, st = [zoomed], k, c;
	while (st.length) {
		k = st.pop();
		if (matched[k]) {
			sum += weight[k];
			continue;
		}
		for (c = 0; c < kids[k].length; c++)
			st.push(kids[k][c]);
	}
	matchedEl.textContent = 'Matched: ' + pct(sum, weight[zoomed] || 1);
}
function search(s) {
	var re, k, any = false;
	term = s || '';
	if (!term) {
		matched = null;
		render();
		return 0;
	}
	try {
		re = new RegExp(term, 'i');
	} catch (e) {
		re = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'i');
	}
	matched = [];
	for (k = 0; k < n; k++)
		if (re.test(full(k)) || re.test(label(k))) {
			matched[k] = true;
			any = true;
		}
	if (!any)
		matched = [];
	render();
	return matched.filter(Boolean).length;
}
function zoom(k) {
	zoomed = k;
	render();
}
function nodeOf(e) {
	var t = e.target;
	while (t && t !== root && !(t.hasAttribute && t.hasAttribute('data-n')))
		t = t.parentNode;
	return t && t !== root ? +t.getAttribute('data-n') : -1;
}
root.addEventListener('click', function (e) {
	var k = nodeOf(e);
	if (k >= 0)
		zoom(k);
});
root.addEventListener('mousemove', function (e) {
	var k = nodeOf(e);
	if (k < 0) {
		if (tip)
			tip.style.display = 'none';
		return;
	}
	if (details)
		details.textContent = full(k) + ' - ' + info(k);
	if (tip) {
		var fr = F[frame[k]], b = doc.createElement('b');
		tip.textContent = '';
		b.textContent = fr[0];
		tip.appendChild(b);
		if (fr[3] === 0)
			tip.appendChild(doc.createTextNode('\n' + fr[1] + (base ? '' : ':' + fr[2])));
		tip.appendChild(doc.createTextNode('\n' + info(k)));
		tip.style.display = 'block';
		var tx = e.pageX + 12, ty = e.pageY + 12;
		if (tx + tip.offsetWidth > window.innerWidth + window.scrollX)
			tx = Math.max(0, e.pageX - tip.offsetWidth - 12);
		tip.style.left = tx + 'px';
		tip.style.top = ty + 'px';
	}
});
root.addEventListener('mouseleave', function () {
	if (tip)
		tip.style.display = 'none';
});
var pick = doc.getElementById('fg-event');
if (events) {
	for (i = 1; i < n; i++) {
		var ev = eventAt(i);
		if (ev !== null && (evNode[ev] === undefined || weight[i] > weight[evNode[ev]]))
			evNode[ev] = i;
	}
}
// The view a reset returns to: the chosen event's tree, or everything.
function home() {
	var ev = pick ? pick.value : events && events[0];
	return events && evNode[ev] !== undefined ? evNode[ev] : 0;
}
if (pick && events) {
	events.forEach(function (ev) {
		var o = doc.createElement('option');
		o.value = o.textContent = ev;
		o.disabled = evNode[ev] === undefined;
		pick.appendChild(o);
	});
	pick.addEventListener('change', function () {
		zoom(home());
	});
}
var reset = doc.getElementById('fg-reset');
if (reset)
	reset.addEventListener('click', function () {
		zoom(home());
	});
var box = doc.getElementById('fg-search');
if (box && html) {
	box.addEventListener('input', function () {
		search(box.value);
	});
} else if (box) {
	box.addEventListener('click', function () {
		var s = window.prompt('Search (regular expression)', term);
		if (s !== null)
			search(s);
	});
}
var info0 = doc.getElementById('fg-info');
if (info0 && events)
	info0.textContent = events.filter(function (ev) {
		return evNode[ev] !== undefined;
	}).map(function (ev) {
		var k = evNode[ev];
		return ev + ': ' + count[k] + ' samples, ' + amount(weight[k], k);
	}).join('; ');
else if (info0)
	info0.textContent = totalCount + ' samples, ' + amount(total);
if (html)
	window.addEventListener('resize', render);
window.flamegraph = {
	search: search, zoom: zoom, reset: function () { zoom(home()); }, events: evNode,
	label: label, full: full, frames: F,
	weight: weight, count: count, frame: frame, parent: parent, base: base
};
zoomed = home();
render();
})();
