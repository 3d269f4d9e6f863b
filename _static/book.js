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
