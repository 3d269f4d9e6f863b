// Clicking a figure in a cell's output opens it at full size in a new tab.
// On a narrow screen (a phone) a figure is never shrunk below the size at which its 10-pt text reads at
// 8 px: it keeps that width and scrolls sideways inside its own box instead.
var LEGIBLE_SCALE = 0.53; // 10 pt at the figures' 110 dpi is 15.3 px; 0.53 of it is 8.1 px

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("div.cell_output img").forEach(function (img) {
    if (img.closest("a")) return;
    var link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.target = "_blank";
    link.rel = "noopener";
    link.title = "open the figure at full size";
    var box = document.createElement("div");
    box.className = "figure-scroll";
    img.parentNode.insertBefore(box, img);
    box.appendChild(link);
    link.appendChild(img);
    var hint = document.createElement("p");
    hint.className = "figure-scroll-hint";
    hint.textContent = "The figure is wider than the screen: swipe sideways, or tap it to open it at full size.";
    box.parentNode.insertBefore(hint, box.nextSibling);
    var keepLegible = function () {
      if (img.naturalWidth) img.style.minWidth = Math.round(img.naturalWidth * LEGIBLE_SCALE) + "px";
      // the hint shows only where the figure does not fit its box (book.css)
      box.classList.toggle("scrolls", box.scrollWidth > box.clientWidth + 1);
    };
    window.addEventListener("resize", keepLegible);
    if (img.complete) keepLegible();
    else img.addEventListener("load", keepLegible);
  });
});

// Navigation on every width. The theme (pydata-sphinx-theme 0.17, sphinx-book-theme 1.3) wires the chapter
// menu (☰) and the contents button to the FIRST .primary-toggle / .secondary-toggle in the page: the copies
// in the site header (#pst-header), which sphinx-book-theme hides. The buttons a reader sees, in the article
// header, get no handler: on a phone neither opens its panel, and on the desktop ☰ does not fold the sidebar.
// Here the visible buttons do what the theme meant: on a wide screen (>= 992 px, the theme's own breakpoint)
// ☰ folds and unfolds the sidebar (the theme's .pst-sidebar-hidden); on a narrower one each button opens its
// panel as a dialog, by handing the click to the hidden copy that the theme's dialog code listens to (it moves
// the sidebar into the dialog and back when it closes). book.css hides the site header, an empty bar whose
// only item was a second search box.
var WIDE_SCREEN = "(min-width: 992px)";

document.addEventListener("DOMContentLoaded", function () {
  var header = document.getElementById("pst-header");
  var sidebar = document.getElementById("pst-primary-sidebar");
  var forward = function (selector) {
    var hidden = header && header.querySelector(selector);
    document.querySelectorAll(".bd-header-article " + selector).forEach(function (button) {
      button.addEventListener("click", function (event) {
        event.preventDefault();
        event.stopPropagation();
        button.blur(); // dismiss the tooltip
        if (selector === ".primary-toggle" && sidebar && window.matchMedia(WIDE_SCREEN).matches) {
          sidebar.classList.toggle("pst-sidebar-hidden");
          button.setAttribute("aria-expanded", String(!sidebar.classList.contains("pst-sidebar-hidden")));
        } else if (hidden) {
          hidden.click(); // the theme's handler: cut the sidebar into its dialog and showModal()
        }
      });
    });
  };
  forward(".primary-toggle");
  forward(".secondary-toggle");
});

// The API reference is one page per floor (book/api/<floor>.html). A link written for the single page it
// used to be (book/api.html#helpers.methods.probes.split_pairs, as older Colab editions have) goes on to the
// entry on its floor's page.
document.addEventListener("DOMContentLoaded", function () {
  if (!/\/book\/api\.html$/.test(window.location.pathname)) return;
  var id = decodeURIComponent(window.location.hash.slice(1));
  var match = /^(?:module-)?helpers\.(model|methods|drivers|book)\b/.exec(id);
  if (match && !document.getElementById(id)) {
    window.location.replace("api/" + match[1] + ".html" + window.location.hash);
  }
});

// On a phone a figure of side-by-side panels is drawn again with its panels one below the other. Its PNG
// names its columns (helpers.book.plots.panels: a tEXt chunk "book-panels" holding the cuts between the
// columns and the band of rows the panels fill, in fractions of the image). Each column becomes a canvas
// cut from the loaded image; a title above the band or a legend below it becomes a piece of its own,
// trimmed to its ink. book.css shows the stack, and hides the scrolling figure, below 600 px. Opened from
// disk (file://) the PNG cannot be read back and the figure keeps its scrolling box.
var PANELS_KEY = "book-panels";

function pngPanels(buffer) {
  var bytes = new Uint8Array(buffer);
  var view = new DataView(buffer);
  for (var at = 8; at + 12 <= bytes.length; ) {
    var length = view.getUint32(at);
    var type = String.fromCharCode(bytes[at + 4], bytes[at + 5], bytes[at + 6], bytes[at + 7]);
    if (type === "tEXt") {
      var data = bytes.subarray(at + 8, at + 8 + length);
      var zero = data.indexOf(0);
      if (String.fromCharCode.apply(null, data.subarray(0, zero)) === PANELS_KEY) {
        return JSON.parse(String.fromCharCode.apply(null, data.subarray(zero + 1)));
      }
    }
    if (type === "IEND") break;
    at += 12 + length;
  }
  return undefined; // no chunk: not a figure of the book's helpers
}

function inkColumns(canvas) {
  // the first and last column holding a pixel darker than near-white: where a title or legend lies
  var ctx = canvas.getContext("2d");
  var pixels = ctx.getImageData(0, 0, canvas.width, canvas.height).data;
  var first = canvas.width, last = -1;
  for (var y = 0; y < canvas.height; y++) {
    for (var x = 0; x < canvas.width; x++) {
      var i = 4 * (y * canvas.width + x);
      if (pixels[i + 3] > 0 && pixels[i] + pixels[i + 1] + pixels[i + 2] < 690) {
        if (x < first) first = x;
        if (x > last) last = x;
      }
    }
  }
  return last < 0 ? null : [Math.max(0, first - 6), Math.min(canvas.width, last + 7)];
}

function cutPiece(img, x0, y0, x1, y1, trim, strip) {
  // the image's region x0..x1, y0..y1; trim: cut to its ink (a title, a legend); strip: [s0, s1], the first
  // column's y-axis labels, drawn on the left of a column that shares its y axis and has none of its own
  var lead = strip ? strip[1] - strip[0] : 0;
  var canvas = document.createElement("canvas");
  canvas.width = lead + x1 - x0;
  canvas.height = y1 - y0;
  var ctx = canvas.getContext("2d");
  if (strip) ctx.drawImage(img, strip[0], y0, lead, y1 - y0, 0, 0, lead, y1 - y0);
  ctx.drawImage(img, x0, y0, x1 - x0, y1 - y0, lead, 0, x1 - x0, y1 - y0);
  if (!trim) return canvas;
  var ink = inkColumns(canvas);
  if (!ink) return null;
  return cutPiece(img, x0 + ink[0], y0, x0 + ink[1], y1, false);
}

function stackPanels(img, layout) {
  var W = img.naturalWidth, H = img.naturalHeight;
  var top = Math.round(layout.band[0] * H), bottom = Math.round(layout.band[1] * H);
  var labels = layout.ylabels || { strip: null, columns: [] };
  var strip = labels.strip && [Math.round(labels.strip[0] * W), Math.round(labels.strip[1] * W)];
  var columns = [];
  for (var k = 0; k + 1 < layout.cuts.length; k++) {
    var borrow = labels.columns.indexOf(k) >= 0 ? strip : null;
    columns.push(cutPiece(img, Math.round(layout.cuts[k] * W), top, Math.round(layout.cuts[k + 1] * W), bottom, false, borrow));
  }
  var pieces = [top > 3 ? cutPiece(img, 0, 0, W, top, true) : null]
    .concat(columns)
    .concat([H - bottom > 3 ? cutPiece(img, 0, bottom, W, H, true) : null]);
  var stack = document.createElement("a");
  stack.className = "figure-stack";
  stack.href = img.getAttribute("src");
  stack.target = "_blank";
  stack.rel = "noopener";
  stack.title = "open the figure at full size";
  stack.setAttribute("aria-label", (img.alt ? img.alt + ": " : "") + "the figure's panels one below the other");
  // every piece at one scale: the widest column of panels fills the column of text, the others keep its
  // proportions; a title or legend wider than that scrolls sideways in a box of its own rather than shrink
  var widest = Math.max.apply(null, columns.map(function (piece) { return piece.width; }));
  pieces.forEach(function (piece) {
    if (!piece) return;
    var share = (100 * piece.width) / widest;
    piece.style.width = share.toFixed(2) + "%";
    // never below the legible scale: a piece that would be scrolls sideways inside the stack instead
    piece.style.minWidth = Math.ceil(piece.width * LEGIBLE_SCALE) + "px";
    if (share <= 100.5) return stack.appendChild(piece);
    piece.style.maxWidth = "none";
    var wide = document.createElement("div");
    wide.className = "figure-stack-wide";
    wide.appendChild(piece);
    stack.appendChild(wide);
  });
  var box = img.closest("div.figure-scroll");
  box.parentNode.insertBefore(stack, box);
  box.classList.add("stacked");
}

document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("div.cell_output div.figure-scroll img").forEach(function (img) {
    var done = function (state) {
      img.dataset.panels = state;
    };
    fetch(img.src)
      .then(function (response) {
        return response.arrayBuffer();
      })
      .then(function (buffer) {
        var layout = pngPanels(buffer);
        if (!layout) return done(layout === null ? "one column" : "unnamed");
        var draw = function () {
          stackPanels(img, layout);
          done("stacked");
        };
        if (img.complete && img.naturalWidth) draw();
        else img.addEventListener("load", draw);
      })
      .catch(function () {
        done("unread");
      });
  });
});
