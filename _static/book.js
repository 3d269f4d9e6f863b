// Clicking a figure in a cell's output opens it at full size in a new tab.
document.addEventListener("DOMContentLoaded", function () {
  document.querySelectorAll("div.cell_output img").forEach(function (img) {
    if (img.closest("a")) return;
    var link = document.createElement("a");
    link.href = img.getAttribute("src");
    link.target = "_blank";
    link.rel = "noopener";
    link.title = "open the figure at full size";
    img.parentNode.insertBefore(link, img);
    link.appendChild(img);
  });
});
