// The site's search, in the page itself. MkDocs' own search starts a Web Worker and asks for search_index.json,
// and a browser refuses both to a page opened from the file system (file://, origin null), where this site is
// meant to be read. Here the index is a script, search/search_index.js (written by dlbench/docgen/site_search.py
// after each build), loaded with lunr.js by <script> tags, and lunr runs in the page: the same results, offline,
// from a web server or from the file system alike.
(function () {
  var INDEX = "dlbenchSearchIndex";  // the variable search_index.js sets
  var index = null, documents = {}, minLength = 3;

  function joinUrl(base, path) {
    if (path.substring(0, 1) === "/") return path;
    return base.substring(base.length - 1) === "/" ? base + path : base + "/" + path;
  }

  function escapeHtml(value) {
    return value.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }

  function load(path, done) {
    var script = document.createElement("script");
    script.src = joinUrl(base_url, path);
    script.onload = done;
    script.onerror = function () { console.error("search: could not load " + path); };
    document.head.appendChild(script);
  }

  function build() {
    var data = window[INDEX];
    if (data.config && data.config.separator && data.config.separator.length) {
      lunr.tokenizer.separator = new RegExp(data.config.separator);
    }
    if (data.config && data.config.min_search_length) minLength = data.config.min_search_length;
    index = lunr(function () {
      this.field("title");
      this.field("text");
      this.ref("location");
      for (var i = 0; i < data.docs.length; i++) {
        this.add(data.docs[i]);
        documents[data.docs[i].location] = data.docs[i];
      }
    });
  }

  function show(found) {
    var box = document.getElementById("mkdocs-search-results");
    if (!box) return;
    box.innerHTML = "";
    if (!found.length) {
      box.insertAdjacentHTML("beforeend", "<p>" + escapeHtml(box.getAttribute("data-no-results-text") ||
                                                             "No results found") + "</p>");
      return;
    }
    found.forEach(function (doc) {
      box.insertAdjacentHTML("beforeend", '<article><h3><a href="' + joinUrl(base_url, doc.location) + '">' +
                             escapeHtml(doc.title) + "</a></h3><p>" + escapeHtml(doc.text.substring(0, 200)) +
                             "</p></article>");
    });
  }

  function search(query) {
    if (query.length < minLength) return show([]);
    var hits;
    try {
      hits = index.search(query);
    } catch (e) {  // lunr's query syntax (a lone "+" or ":"): search for the words alone
      hits = index.search(query.replace(/[:+\-~^*]/g, " "));
    }
    show(hits.map(function (hit) { return documents[hit.ref]; }));
  }

  function start() {
    build();
    var input = document.getElementById("mkdocs-search-query");
    if (!input) return;
    input.addEventListener("keyup", function () { search(input.value); });
    var term = new URLSearchParams(window.location.search).get("q");  // page.html?q=words searches at once
    if (term) {
      input.value = term;
      search(term);
    }
  }

  load("search/lunr.js", function () { load("search/search_index.js", start); });
})();
