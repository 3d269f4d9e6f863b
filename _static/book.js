// Clicking a figure in a cell's output opens it at full size in a new tab.
// On a narrow screen (a phone) a figure is never shrunk below the size at which its 10-pt text reads at
// about 6 px: it keeps that width and scrolls sideways inside its own box instead.
var LEGIBLE_SCALE = 0.42; // 10 pt at the figures' 110 dpi is 15.3 px; 0.42 of it is 6.4 px

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
