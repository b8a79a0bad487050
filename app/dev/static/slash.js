// Slash commands in the playground: typing "/" in the message box opens a menu of the commands
// the bot registered with the fake Discord; choosing one opens its options (memory ids are
// autocompleted by the bot itself, from the asker's own memories). Each use becomes an
// INTERACTION_CREATE that the fake Discord makes and this page posts to /webhook, as the relay
// would; the bot's answers are ephemeral: shown only while you play the person who asked.
"use strict";

(() => {
  const page = window.playground;
  const $ = (id) => document.getElementById(id);
  const TYPES = { SUB: 1, GROUP: 2, STRING: 3, INTEGER: 4, BOOLEAN: 5, USER: 6, CHANNEL: 7 };
  const slash = {
    entries: [], // {path: "memory forget", description, options}
    chosen: null, // an entry
    values: {}, // option name -> value
    typingIn: null, // the option being autocompleted
    asked: new Map(), // autocomplete interaction id -> option name
    answers: new Map(), // ephemeral message id -> message
    loaded: false,
  };

  // --- the registered commands, flattened to what can be used --------------------------

  function flatten(options, path, description) {
    const groups = (options || []).filter((o) => o.type === TYPES.SUB || o.type === TYPES.GROUP);
    if (!groups.length) return [{ path, description, options: options || [] }];
    return groups.flatMap((o) => flatten(o.options, `${path} ${o.name}`, o.description));
  }

  async function load() {
    const response = await fetch("/playground/commands");
    if (!response.ok) return;
    const commands = await response.json();
    slash.entries = commands.flatMap((c) => flatten(c.options, c.name, c.description));
    slash.loaded = true;
  }

  // --- the menu and the options form ---------------------------------------------------

  // "/" typed before the commands came: this script can run after the page showed its
  // first channel (both are deferred; the page starts while this one is still downloading),
  // so it may never have seen the view that loads them.
  async function openMenu() {
    if (!slash.loaded) await load();
    const text = $("text").value;
    if (!slash.chosen && text.startsWith("/")) menu(text);
  }

  function menu(typed) {
    const wanted = typed.slice(1).trim().toLowerCase();
    const found = slash.entries.filter((e) => e.path.startsWith(wanted) || wanted.startsWith(e.path));
    const box = $("slash");
    box.hidden = !found.length;
    box.replaceChildren(
      page.el("p", { class: "slash-title" }, "Commands of companion"),
      page.el("ul", { class: "slash-menu", role: "listbox", "aria-label": "Slash commands" },
        found.map((entry) => page.el("li", {},
          page.el("button", { type: "button", class: "slash-entry", onclick: () => choose(entry) },
            page.el("strong", {}, `/${entry.path}`), ` ${entry.description}`)))),
    );
  }

  function choose(entry) {
    slash.chosen = entry;
    slash.values = {};
    $("text").value = `/${entry.path} `;
    form();
    $("slash").querySelector("input, select")?.focus();
  }

  function field(option) {
    const id = `slash-${option.name}`;
    const label = page.el("label", { for: id }, `${option.name}${option.required ? "" : " (optional)"}: ${option.description}`);
    const set = (value) => { slash.values[option.name] = value; };
    let input;
    if (option.type === TYPES.BOOLEAN) {
      input = page.el("input", { id, type: "checkbox", onchange: (e) => set(e.target.checked) });
    } else if (option.choices || option.type === TYPES.USER || option.type === TYPES.CHANNEL) {
      const choices = option.choices || (option.type === TYPES.USER
        ? page.state.config.people.map((p) => ({ name: p.name, value: p.id }))
        : page.state.config.guild.channels.map((c) => ({ name: `#${c.name}`, value: c.id })));
      input = page.el("select", { id, onchange: (e) => set(e.target.value || undefined) },
        page.el("option", { value: "" }, "—"), choices.map((c) => page.el("option", { value: c.value }, c.name)));
    } else {
      input = page.el("input", {
        id, type: "text", autocomplete: "off", "aria-autocomplete": option.autocomplete ? "list" : null,
        oninput: (e) => { set(e.target.value); if (option.autocomplete) suggest(option.name, e.target.value); },
      });
    }
    const choices = option.autocomplete
      ? page.el("ul", { id: `${id}-choices`, class: "slash-choices", role: "listbox", "aria-label": `Choices for ${option.name}` })
      : null;
    return page.el("div", { class: "slash-field" }, label, input, choices);
  }

  function form() {
    const entry = slash.chosen;
    $("slash").hidden = false;
    $("slash").replaceChildren(
      page.el("p", { class: "slash-title" }, page.el("strong", {}, `/${entry.path}`), ` ${entry.description}`),
      ...entry.options.map(field),
      page.el("div", { class: "row" },
        page.el("button", { type: "button", id: "slash-send", onclick: () => page.run(send) }, `Send /${entry.path}`),
        page.el("button", { type: "button", onclick: close }, "Cancel")),
    );
  }

  function close() {
    slash.chosen = null;
    $("slash").hidden = true;
    $("slash").replaceChildren();
    $("text").value = "";
  }

  // --- interactions: made by the fake Discord, posted to /webhook like the relay --------

  // ``focused``: the option being autocompleted; its interaction id is known before the
  // interaction is dispatched, since the bot's choices may come back on the live feed before
  // the dispatch's own response does.
  async function interaction(values, focused = null, chosen = slash.chosen) {
    const me = page.state.me;
    const channel = page.state.channel;
    const response = await fetch("/playground/interactions", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        command: `/${chosen.path}`, values, focused, user: me.id, username: me.name,
        channel, guild: page.isDm(channel) ? null : page.state.config.guild.id,
      }),
    });
    const body = await response.json();
    if (!response.ok) throw new Error(body.detail || `the playground answered ${response.status}`);
    if (focused) slash.asked.set(body.d.id, focused);
    await page.dispatch("INTERACTION_CREATE", body.d);
    return body.d;
  }

  let pending = null;
  function suggest(name, typed) {
    clearTimeout(pending);
    pending = setTimeout(() => page.run(async () => {
      await interaction({ ...slash.values, [name]: typed }, name);
    }), 200);
  }

  function offered({ interaction_id: id, choices }) {
    const name = slash.asked.get(id);
    const list = name && $(`slash-${name}-choices`);
    if (!list) return;
    list.replaceChildren(...choices.map((c) => page.el("li", {},
      page.el("button", { type: "button", class: "slash-choice", onclick: () => {
        slash.values[name] = c.value;
        $(`slash-${name}`).value = String(c.value);
        list.replaceChildren();
      } }, c.name))));
  }

  async function send() {
    const missing = slash.chosen.options.filter((o) => o.required && (slash.values[o.name] ?? "") === "");
    if (missing.length) throw new Error(`fill in ${missing.map((o) => o.name).join(", ")}`);
    const values = Object.fromEntries(Object.entries(slash.values).filter(([, v]) => v !== undefined && v !== ""));
    for (const option of slash.chosen.options) {
      if (option.type === TYPES.INTEGER && /^\d+$/.test(String(values[option.name] ?? ""))) values[option.name] = Number(values[option.name]);
    }
    // The form closes as the command is sent, not when the send returns: the answer can come
    // back on the live feed first, and a command typed by then must keep its menu.
    const chosen = slash.chosen;
    close();
    await interaction(values, null, chosen);
  }

  // --- ephemeral answers: only while playing the person who asked ------------------------

  function answerNode(message) {
    const files = (message.attachments || []).map((a) => page.el("li", {}, `📎 ${a.filename} (${a.size} bytes)`));
    return page.el("li", { class: "slash-answer", id: `e-${message.id}` },
      page.el("p", { class: "meta" }, page.el("strong", {}, page.state.config.bot.name), " · ",
        page.el("span", { class: "only-you" }, "Only you can see this")),
      page.el("p", { class: "content" }, message.loading ? `${page.state.config.bot.name} is thinking…` : message.content),
      files.length ? page.el("ul", { class: "files" }, files) : null);
  }

  function showAnswer(message) {
    const existing = document.getElementById(`e-${message.id}`);
    const mine = page.state.me && message.visible_to === page.state.me.id;
    if (!mine || message.channel_id !== page.state.channel) {
      existing?.remove();
      return;
    }
    if (existing) existing.replaceWith(answerNode(message));
    else $("messages").append(answerNode(message));
  }

  function onFeed(kind, data) {
    if (kind === "view") {
      if (!slash.loaded) page.run(load);
      for (const message of slash.answers.values()) showAnswer(message);
    } else if (kind === "interaction_message" && data.ephemeral) {
      slash.answers.set(data.id, data);
      showAnswer(data);
    } else if (kind === "autocomplete") {
      offered(data);
    }
  }

  page.listeners.push(onFeed);
  $("text").addEventListener("input", (e) => {
    const text = e.target.value;
    if (slash.chosen && !text.startsWith(`/${slash.chosen.path}`)) close();
    if (!slash.chosen && text.startsWith("/")) slash.loaded ? menu(text) : page.run(openMenu);
    else if (!slash.chosen) $("slash").hidden = true;
  });
  // Enter on "/memory show" sends the command rather than a message with that text.
  $("text").addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey || !$("text").value.startsWith("/")) return;
    e.preventDefault();
    e.stopImmediatePropagation();
    if (slash.chosen) page.run(send);
    else {
      const typed = $("text").value.slice(1).trim().toLowerCase();
      const exact = slash.entries.find((entry) => entry.path === typed);
      if (exact) choose(exact);
    }
  }, true);
})();
