// Keeps the "Running" table current from /events (server-sent events); the page is whole
// without it. Text goes in with textContent only: nothing from the stream is read as HTML.
(function () {
  "use strict";
  var body = document.querySelector("#running tbody");
  var state = document.getElementById("live-state");
  var csrf = document.getElementById("csrf");
  var waits = document.querySelectorAll("article.wait").length;
  var received = 0;
  var rows = [];
  if (!body || !window.EventSource) { return; }

  function duration(s) {
    s = Math.max(0, Math.round(s));
    if (s < 60) { return s + "s"; }
    if (s < 3600) { return Math.floor(s / 60) + "m " + (s % 60) + "s"; }
    return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  }

  function cell(tr, text, cls) {
    var td = document.createElement("td");
    if (cls) { td.className = cls; }
    td.textContent = text;
    tr.appendChild(td);
    return td;
  }

  function cancelForm(task) {
    var form = document.createElement("form");
    form.method = "post"; form.action = "/actions/cancel"; form.className = "inline";
    [["csrf", csrf.value], ["task", task]].forEach(function (pair) {
      var input = document.createElement("input");
      input.type = "hidden"; input.name = pair[0]; input.value = pair[1];
      form.appendChild(input);
    });
    var button = document.createElement("button");
    button.textContent = "Cancel";
    form.appendChild(button);
    return form;
  }

  function render() {
    body.textContent = "";
    if (!rows.length) {
      var tr = document.createElement("tr");
      tr.className = "empty";
      var td = cell(tr, "nothing runs now");
      td.colSpan = 10;
      body.appendChild(tr);
      return;
    }
    var since = (Date.now() - received) / 1000;
    rows.forEach(function (r) {
      var tr = document.createElement("tr");
      tr.dataset.task = r.task_id;
      var run = cell(tr, "");
      var link = document.createElement("a");
      link.href = "/runs/" + r.run; link.textContent = String(r.run);
      run.appendChild(link);
      cell(tr, r.machine);
      cell(tr, r.task_id + " " + (r.title || ""));
      cell(tr, r.mode || "-");
      cell(tr, r.iteration + "/" + r.max_iterations, "iteration");
      cell(tr, duration(r.elapsed_s + since), "elapsed");
      cell(tr, "$" + Number(r.cost_usd || 0).toFixed(4));
      cell(tr, r.tool || "-", "tool");
      cell(tr, r.finding || "");
      var actions = cell(tr, "");
      if (csrf) { actions.appendChild(cancelForm(r.task_id)); }
      body.appendChild(tr);
    });
  }

  var source = new EventSource("/events");
  source.addEventListener("now", function (event) {
    var data = JSON.parse(event.data);
    rows = data.running || [];
    received = Date.now();
    render();
    if (state) { state.textContent = "(live)"; }
    if (data.waiting !== waits && !document.getElementById("waits-changed")) {
      var note = document.createElement("p");
      note.id = "waits-changed"; note.className = "flash";
      var link = document.createElement("a");
      link.href = "/"; link.textContent = "The waiting tasks changed: reload";
      note.appendChild(link);
      document.querySelector("main").prepend(note);
    }
  });
  source.onerror = function () { if (state) { state.textContent = "(reconnecting…)"; } };
  setInterval(function () { if (rows.length) { render(); } }, 1000);
})();
