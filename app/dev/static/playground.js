// The playground: plays Discord against the local stack. Messages, edits, deletes, reactions
// and new threads are posted to /webhook as gateway dispatch frames; attached files are first
// uploaded to the fake CDN, as Discord keeps them on its own. What happens (frames the webhook
// accepted, and the bot's messages, reactions and typing through the fake Discord REST API)
// comes back on one server-sent event stream. The console beside it uses the admin API.
"use strict";

const DISCORD_EPOCH = 1420070400000n;
const EMOJIS = ["👍", "❤️", "😂", "🎉", "😮"];
const TYPING_MS = 10000; // how long Discord shows one typing call
const IMAGE_TYPES = ["image/png", "image/jpeg", "image/gif", "image/webp"];
const $ = (id) => document.getElementById(id);
// What slash.js (the slash commands) uses of this page: its state, the webhook, the feed.
const hooks = { listeners: [] };

const state = {
  config: null,
  me: null, // a person of config.people
  channel: null, // channel id (string)
  session: "playground-" + crypto.getRandomValues(new Uint32Array(2)).join(""),
  seq: 0,
  counter: 0,
  messages: new Map(), // id -> message
  replyTo: null, // message id
  editing: null, // message id
  unread: new Map(), // channel id -> count
  ledgerBefore: null,
  ledgerPaged: false,
  pendingRollback: null,
  threads: new Map(), // thread id -> {id, parentId, name}
  typing: new Map(), // channel id -> when the bot's typing indicator ends (ms)
};

// --- helpers --------------------------------------------------------------------------

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") node.className = value;
    else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function snowflake() {
  const stamp = BigInt(Date.now()) - DISCORD_EPOCH;
  const random = BigInt(crypto.getRandomValues(new Uint16Array(1))[0] & 0x3ff);
  state.counter = (state.counter + 1) & 0xfff;
  return ((stamp << 22n) | (random << 12n) | BigInt(state.counter)).toString();
}

function person(id) {
  return state.config.people.find((p) => p.id === id) || null;
}

function channelName(id) {
  const channel = state.config.guild.channels.find((c) => c.id === id);
  if (channel) return "#" + channel.name;
  const thread = state.threads.get(id);
  if (thread) return `${channelName(thread.parentId)} › ${thread.name}`;
  const owner = state.config.people.find((p) => p.dmChannel === id);
  return owner ? `DM ${owner.name} ↔ ${state.config.bot.name}` : id;
}

function isDm(channelId) {
  return state.config.people.some((p) => p.dmChannel === channelId);
}

function parentOf(channelId) {
  return state.threads.get(channelId)?.parentId || channelId;
}

function sizeText(size) {
  if (size < 1024) return `${size} B`;
  if (size < 1024 * 1024) return `${Math.round(size / 1024)} KB`;
  return `${(size / (1024 * 1024)).toFixed(1)} MB`;
}

function nameOf(id) {
  return id === state.config.bot.id ? state.config.bot.name : person(id)?.name || "unknown-user";
}

// A message as plain text (previews): mentions shown as the names Discord shows.
function readable(text) {
  return text.replace(/<@!?(\d+)>/g, (_, id) => "@" + nameOf(id)).replace(/<#(\d+)>/g, (_, id) => channelName(id));
}

// Discord's markdown, as nodes (never HTML): code, bold, italics, underline, strike, spoilers,
// quotes, links, and <@id> / <#id> mentions shown by name.
const INLINE = /`([^`\n]+)`|\*\*([\s\S]+?)\*\*|__([\s\S]+?)__|\*([^*\s](?:[\s\S]*?[^*\s])?)\*|\b_([^_\s](?:[\s\S]*?[^_\s])?)_\b|~~([\s\S]+?)~~|\|\|([\s\S]+?)\|\||<@!?(\d+)>|<#(\d+)>|(https?:\/\/[^\s<]+[^\s<.,:;"')\]!?])/g;

function inline(text) {
  const nodes = [];
  let last = 0;
  for (const m of text.matchAll(INLINE)) {
    if (m.index > last) nodes.push(text.slice(last, m.index));
    nodes.push(inlineNode(m));
    last = m.index + m[0].length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

function inlineNode(m) {
  if (m[1] !== undefined) return el("code", {}, m[1]);
  if (m[2] !== undefined) return el("strong", {}, inline(m[2]));
  if (m[3] !== undefined) return el("u", {}, inline(m[3]));
  if (m[4] !== undefined || m[5] !== undefined) return el("em", {}, inline(m[4] ?? m[5]));
  if (m[6] !== undefined) return el("s", {}, inline(m[6]));
  if (m[7] !== undefined) {
    const spoiler = el("span", { class: "spoiler", tabindex: 0, title: "spoiler: click to show" }, inline(m[7]));
    spoiler.addEventListener("click", () => spoiler.classList.add("shown"));
    return spoiler;
  }
  if (m[8] !== undefined) return el("span", { class: "mention", title: `<@${m[8]}>` }, "@" + nameOf(m[8]));
  if (m[9] !== undefined) return el("span", { class: "mention" }, channelName(m[9]));
  return el("a", { href: m[10], target: "_blank", rel: "noopener noreferrer" }, m[10]);
}

function rich(text) {
  const nodes = [];
  for (const part of text.split(/(```[\s\S]*?```)/)) {
    if (part.length >= 6 && part.startsWith("```") && part.endsWith("```")) {
      nodes.push(el("pre", { class: "codeblock" }, el("code", {}, part.slice(3, -3).replace(/^[\w+-]*\n/, ""))));
      continue;
    }
    let quote = [];
    const flush = () => {
      if (quote.length) nodes.push(el("blockquote", {}, inline(quote.join("\n"))));
      quote = [];
    };
    part.split("\n").forEach((line, i, lines) => {
      if (/^>\s/.test(line)) return quote.push(line.replace(/^>\s/, ""));
      flush();
      nodes.push(...inline(line));
      if (i < lines.length - 1) nodes.push("\n");
    });
    flush();
  }
  return nodes;
}

function clock(iso) {
  const date = new Date(iso);
  return isNaN(date) ? "" : date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
}

function status(id, text, bad = false) {
  const node = $(id);
  node.textContent = text;
  node.classList.toggle("bad", bad);
}

// --- the gateway side: frames to /webhook -----------------------------------------------

async function dispatch(t, d) {
  state.seq += 1;
  const response = await fetch("/webhook", {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-discord-gateway-token": state.config.gatewayToken,
      "x-discord-gateway-session": state.session,
    },
    body: JSON.stringify({ op: 0, t, s: state.seq, d }),
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`/webhook answered ${response.status}: ${JSON.stringify(body)}`);
  return body;
}

function author(p) {
  return { id: p.id, username: p.name.toLowerCase(), global_name: p.name, bot: false };
}

function place(channelId) {
  return isDm(channelId) ? {} : { guild_id: state.config.guild.id };
}

// A file the person attaches: uploaded to the fake CDN, described as Discord describes it.
async function upload(file) {
  const response = await fetch("/playground/attachments", {
    method: "POST",
    headers: { "content-type": file.type || "application/octet-stream", "x-filename": encodeURIComponent(file.name) },
    body: file,
  });
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(`could not attach ${file.name}: ${body.detail || response.status}`);
  return body;
}

// Discord lists the users a message mentions: the bot and anyone inserted from the member list.
function mentioned(content) {
  const ids = new Set([...content.matchAll(/<@!?(\d+)>/g)].map((m) => m[1]));
  return [...ids].filter((id) => id === state.config.bot.id || person(id)).map((id) =>
    id === state.config.bot.id ? { id, username: state.config.bot.name, bot: true } : author(person(id)));
}

async function sendMessage(text, files = []) {
  const bot = state.config.bot;
  const dm = isDm(state.channel);
  // Commands (`!memory show`) work without a mention, and a mention in front would hide them.
  const mention = !dm && $("mention").checked && !text.startsWith("!");
  const content = mention ? `<@${bot.id}> ${text}`.trim() : text;
  const attachments = [];
  for (const file of files) attachments.push(await upload(file));
  const d = {
    id: snowflake(),
    channel_id: state.channel,
    ...place(state.channel),
    type: 0,
    content,
    timestamp: new Date().toISOString(),
    edited_timestamp: null,
    tts: false,
    mention_everyone: false,
    mentions: mentioned(content),
    mention_roles: [],
    attachments,
    embeds: [],
    pinned: false,
    author: author(state.me),
  };
  if (!dm) d.member = { nick: null, roles: [] };
  const target = state.replyTo && state.messages.get(state.replyTo);
  if (target) {
    d.type = 19;
    d.message_reference = { message_id: target.id, channel_id: target.channelId, ...place(target.channelId) };
    d.referenced_message = {
      id: target.id,
      channel_id: target.channelId,
      author: { id: target.author.id, username: target.author.name, bot: target.author.bot },
      content: target.content,
    };
  }
  await dispatch("MESSAGE_CREATE", d);
}

async function startThread(name) {
  const parentId = parentOf(state.channel);
  const d = {
    id: snowflake(),
    guild_id: state.config.guild.id,
    parent_id: parentId,
    name: name || `thread ${state.threads.size + 1}`,
    type: 11,
    owner_id: state.me.id,
    newly_created: true,
    message_count: 0,
    member_count: 1,
    thread_metadata: { archived: false, auto_archive_duration: 1440, locked: false, create_timestamp: new Date().toISOString() },
  };
  await dispatch("THREAD_CREATE", d);
  addThread(d);
  showChannel(d.id);
}

function addThread(d) {
  state.threads.set(String(d.id), { id: String(d.id), parentId: String(d.parent_id), name: d.name || String(d.id) });
  renderChannels();
}

async function editMessage(message, content) {
  await dispatch("MESSAGE_UPDATE", {
    id: message.id,
    channel_id: message.channelId,
    ...place(message.channelId),
    content,
    edited_timestamp: new Date().toISOString(),
    author: author(state.me),
  });
}

async function deleteMessage(message) {
  await dispatch("MESSAGE_DELETE", { id: message.id, channel_id: message.channelId, ...place(message.channelId) });
}

async function toggleReaction(message, emoji) {
  const mine = (message.reactions.get(emoji) || new Set()).has(state.me.id);
  const d = {
    user_id: state.me.id,
    channel_id: message.channelId,
    message_id: message.id,
    ...place(message.channelId),
    emoji: { id: null, name: emoji },
  };
  if (mine) {
    await dispatch("MESSAGE_REACTION_REMOVE", d);
  } else {
    d.message_author_id = message.author.id;
    if (!isDm(message.channelId)) d.member = { nick: null, roles: [] };
    await dispatch("MESSAGE_REACTION_ADD", d);
  }
}

// --- the feed: what happened ------------------------------------------------------------

function upsertMessage(data, fromBot) {
  const id = String(data.id);
  const existing = state.messages.get(id);
  const who = data.author || {};
  const message = existing || {
    id,
    channelId: String(data.channel_id),
    author: { id: String(who.id), name: who.global_name || who.username || who.id, bot: Boolean(who.bot || fromBot) },
    content: "",
    timestamp: data.timestamp,
    edited: false,
    deleted: false,
    reference: data.message_reference ? String(data.message_reference.message_id) : null,
    reactions: new Map(),
    attachments: data.attachments || [],
  };
  message.content = data.content ?? message.content;
  state.messages.set(id, message);
  if (!existing) arrived(message);
  if (message.author.bot) stopTyping(message.channelId);
  render(message);
}

// --- "companion is typing…" -----------------------------------------------------------

function typingFrom(data) {
  const since = Number(data.timestamp) * 1000 || Date.now();
  const until = since + TYPING_MS;
  if (until <= Date.now()) return; // an old event replayed from the feed's history
  state.typing.set(String(data.channel_id), until);
  renderTyping();
}

function stopTyping(channelId) {
  if (state.typing.delete(channelId)) renderTyping();
}

function renderTyping() {
  const until = state.typing.get(state.channel) || 0;
  $("typing").textContent = until > Date.now() ? `${state.config.bot.name} is typing…` : "";
}
setInterval(() => state.config && renderTyping(), 1000);

// What each channel was last read up to, kept in this browser: the feed replays the history
// on every load, and a message read before the reload is not new again.
const SEEN_KEY = "playground-seen";
const seen = JSON.parse(localStorage.getItem(SEEN_KEY) || "{}");

function markSeen(channelId, messageId) {
  if (seen[channelId] && BigInt(seen[channelId]) >= BigInt(messageId)) return;
  seen[channelId] = messageId;
  localStorage.setItem(SEEN_KEY, JSON.stringify(seen));
}

function arrived(message) {
  if (message.channelId === state.channel) return markSeen(message.channelId, message.id);
  if (seen[message.channelId] && BigInt(message.id) <= BigInt(seen[message.channelId])) return;
  state.unread.set(message.channelId, (state.unread.get(message.channelId) || 0) + 1);
  renderNav();
}

function react(channelId, messageId, emoji, userId, add) {
  const message = state.messages.get(String(messageId));
  if (!message) return;
  const users = message.reactions.get(emoji) || new Set();
  if (add) users.add(String(userId));
  else users.delete(String(userId));
  if (users.size) message.reactions.set(emoji, users);
  else message.reactions.delete(emoji);
  render(message);
}

function onFrame({ t, d }) {
  switch (t) {
    case "MESSAGE_CREATE":
      return upsertMessage(d, false);
    case "MESSAGE_UPDATE": {
      const message = state.messages.get(String(d.id));
      if (!message) return;
      message.content = d.content ?? message.content;
      message.edited = true;
      return render(message);
    }
    case "MESSAGE_DELETE": {
      const message = state.messages.get(String(d.id));
      if (!message) return;
      message.deleted = true;
      return render(message);
    }
    case "MESSAGE_REACTION_ADD":
      return react(d.channel_id, d.message_id, d.emoji.name, d.user_id, true);
    case "MESSAGE_REACTION_REMOVE":
      return react(d.channel_id, d.message_id, d.emoji.name, d.user_id, false);
    case "THREAD_CREATE":
    case "THREAD_UPDATE":
      return addThread(d);
  }
}

function onEvent(event) {
  const { kind, data } = JSON.parse(event.data);
  if (kind === "frame") onFrame(data);
  else if (kind === "message") upsertMessage(data, true);
  else if (kind === "reaction") react(data.channel_id, data.message_id, data.emoji, data.user_id, true);
  else if (kind === "typing") typingFrom(data);
  for (const listener of hooks.listeners) listener(kind, data);
  if (kind === "message" || kind === "reaction" || kind === "frame") consoleSoon();
}

function follow() {
  const source = new EventSource("/playground/events");
  source.onopen = () => status("live", "live: connected to the local stack");
  source.onerror = () => status("live", "reconnecting to the local stack…", true);
  source.onmessage = onEvent;
}

// --- rendering the chat -----------------------------------------------------------------

function render(message) {
  const list = $("messages");
  const existing = document.getElementById("m-" + message.id);
  if (message.channelId !== state.channel) {
    existing?.remove();
    return;
  }
  const node = messageNode(message);
  if (existing) return existing.replaceWith(node);
  const following = atEnd();
  list.append(node);
  if (following || (state.me && message.author.id === state.me.id)) toEnd();
  else $("new-messages").hidden = false;
}

// The chat follows the newest message unless the reader scrolled up to read older ones;
// then a "new messages" button says there is more below.
function atEnd() {
  const list = $("messages");
  return list.scrollHeight - list.scrollTop - list.clientHeight < 48;
}

function toEnd() {
  const list = $("messages");
  list.scrollTop = list.scrollHeight;
  $("new-messages").hidden = true;
}

function messageNode(message) {
  const mine = state.me && message.author.id === state.me.id;
  const referenced = message.reference && state.messages.get(message.reference);
  const reactions = [...message.reactions.entries()].map(([emoji, users]) => {
    const names = [...users].map((id) => (id === state.config.bot.id ? state.config.bot.name : person(id)?.name || id));
    return el("li", { class: users.has(state.me.id) ? "mine" : null, title: names.join(", ") },
      `${emoji} ${users.size}`, el("span", { class: "sr" }, ` by ${names.join(", ")}`));
  });
  const actions = message.deleted ? [] : [
    el("button", { type: "button", onclick: () => startReply(message) }, "Reply"),
    ...EMOJIS.slice(0, 3).map((emoji) =>
      el("button", { type: "button", class: "emoji", "aria-label": `React with ${emoji}`, onclick: () => run(() => toggleReaction(message, emoji)) }, emoji)),
    mine ? el("button", { type: "button", onclick: () => startEdit(message) }, "Edit") : null,
    mine ? el("button", { type: "button", onclick: () => run(() => deleteMessage(message)) }, "Delete") : null,
  ];
  const body = state.editing === message.id ? editor(message)
    : el("div", { class: "content" }, message.deleted ? "(message deleted)" : rich(message.content));
  const files = message.deleted || !message.attachments.length ? null
    : el("ul", { class: "files", "aria-label": "Attachments" }, message.attachments.map(fileNode));
  return el("li", { id: "m-" + message.id, class: `msg${message.author.bot ? " bot" : ""}${message.deleted ? " deleted" : ""}`, "data-author": message.author.name },
    referenced ? el("p", { class: "ref" }, `↪ replying to ${referenced.author.name}: “${readable(referenced.content).slice(0, 80)}”`) : null,
    el("p", { class: "meta" },
      el("span", { class: "author" }, message.author.name), message.author.bot ? el("span", { class: "tag" }, "BOT") : null,
      el("time", { datetime: message.timestamp }, clock(message.timestamp)), message.edited ? " (edited)" : null),
    body,
    files,
    reactions.length ? el("ul", { class: "reactions", "aria-label": "Reactions" }, reactions) : null,
    el("div", { class: "actions" }, actions));
}

function fileNode(attachment) {
  const type = (attachment.content_type || "").split(";")[0];
  const label = `${attachment.filename} (${sizeText(attachment.size || 0)})`;
  if (IMAGE_TYPES.includes(type) && attachment.url) {
    return el("li", {}, el("img", { src: attachment.url, alt: `image ${attachment.filename}`, title: label }));
  }
  return el("li", { class: "file" }, `📎 ${label}`);
}

function editor(message) {
  const box = el("textarea", { "aria-label": "Edit message", rows: 2 });
  box.value = message.content;
  const save = () => run(async () => { await editMessage(message, box.value); stopEdit(message); });
  box.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); save(); }
    if (e.key === "Escape") stopEdit(message);
  });
  queueMicrotask(() => box.focus());
  return el("div", { class: "editor" }, box,
    el("button", { type: "button", onclick: save }, "Save"),
    el("button", { type: "button", onclick: () => stopEdit(message) }, "Cancel"));
}

function startEdit(message) { state.editing = message.id; render(message); }
function stopEdit(message) { state.editing = null; render(message); }

function startReply(message) {
  state.replyTo = message.id;
  $("replying").hidden = false;
  $("replying-text").textContent = `Replying to ${message.author.name}: “${readable(message.content).slice(0, 60)}”`;
  $("text").focus();
}

function cancelReply() {
  state.replyTo = null;
  $("replying").hidden = true;
}

function showChannel(channelId) {
  state.channel = channelId;
  state.unread.delete(channelId);
  cancelReply();
  const name = channelName(channelId);
  $("channel-title").textContent = name;
  $("text-label").textContent = "Message " + name;
  $("mention").disabled = isDm(channelId);
  $("thread-form").hidden = isDm(channelId);
  $("thread-label").textContent = `New thread in ${channelName(parentOf(channelId))}`;
  renderTyping();
  $("messages").replaceChildren();
  const here = [...state.messages.values()].filter((m) => m.channelId === channelId);
  here.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
  for (const message of here) $("messages").append(messageNode(message));
  if (here.length) markSeen(channelId, here[here.length - 1].id);
  toEnd();
  renderNav();
  for (const listener of hooks.listeners) listener("view", { channel: channelId });
}

function channelButton(id, label, extra = {}) {
  return el("button", { type: "button", class: "channel", "data-channel": id, onclick: () => showChannel(id), ...extra },
    el("span", { "aria-hidden": "true" }, label.mark), ` ${label.name} `, el("span", { class: "badge", hidden: true }));
}

function renderMembers() {
  const { bot, people } = state.config;
  const members = [{ id: bot.id, name: bot.name, tag: "BOT" }, ...people.map((p) => ({ id: p.id, name: p.name, tag: p.staff ? "staff" : null }))];
  $("members").replaceChildren(...members.map((m) => el("li", {},
    el("button", { type: "button", class: "member", "data-member": m.id, title: `Insert <@${m.id}> in the message`, onclick: () => insertMention(m.id) },
      el("span", { class: "member-name" }, m.name), m.tag ? el("span", { class: "tag" }, m.tag) : null,
      el("code", { class: "member-id" }, m.id)))));
}

function insertMention(id) {
  const box = $("text");
  const mention = `<@${id}> `;
  const at = box.selectionStart ?? box.value.length;
  box.value = box.value.slice(0, at) + mention + box.value.slice(box.selectionEnd ?? at);
  box.focus();
  box.selectionStart = box.selectionEnd = at + mention.length;
}

function renderChannels() {
  const items = [];
  for (const c of state.config.guild.channels) {
    items.push(el("li", {}, channelButton(c.id, { mark: "#", name: c.name })));
    for (const t of state.threads.values()) {
      if (t.parentId === c.id) {
        items.push(el("li", { class: "thread" }, channelButton(t.id, { mark: "↳", name: t.name }, { "aria-label": `thread ${t.name} in #${c.name}` })));
      }
    }
  }
  $("channels").replaceChildren(...items);
  if (state.channel) renderNav();
}

function renderNav() {
  for (const button of document.querySelectorAll("[data-channel]")) {
    const id = button.dataset.channel;
    button.setAttribute("aria-current", id === state.channel ? "page" : "false");
    const count = state.unread.get(id) || 0;
    button.querySelector(".badge").hidden = !count;
    button.querySelector(".badge").textContent = count ? `${count} new` : "";
  }
}

async function run(action) {
  try {
    await action();
    status("send-status", "");
  } catch (error) {
    status("send-status", String(error.message || error), true);
  }
}

// --- the memory console (admin API) ----------------------------------------------------

async function admin(method, path, body) {
  const response = await fetch(path, {
    method,
    headers: {
      authorization: `Bearer ${state.config.adminSecret}`,
      ...(body !== undefined ? { "content-type": "application/json" } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  });
  const data = await response.json().catch(() => null);
  return { status: response.status, ok: response.ok, data };
}

const consolePerson = () => $("console-person").value;

async function loadMemories() {
  const answer = await admin("GET", `/users/${consolePerson()}/memories`);
  const panel = $("memories");
  if (!answer.ok) return panel.replaceChildren(el("p", { class: "bad" }, `error ${answer.status}`));
  const memories = answer.data; // list[MemoryBody]
  if (!memories.length) return panel.replaceChildren(el("p", {}, "No memories yet."));
  panel.replaceChildren(el("ul", { class: "memories" }, memories.map(memoryNode)));
}

// GET /users/{id}/memories: origin is {kind: guild|dm|unknown|any, guildId}.
const ORIGINS = {
  dm: "a DM (only in DMs)",
  unknown: "unknown (kept to DMs)",
  any: "written by hand (anywhere)",
};

function guildName(guildId) {
  return guildId === state.config.guild.id ? `${state.config.guild.name} (guild)` : `guild ${guildId}`;
}

function describeOrigin(origin) {
  if (!origin) return ORIGINS.unknown;
  return origin.kind === "guild" ? guildName(origin.guildId) : ORIGINS[origin.kind] ?? origin.kind;
}

function sourcePlace(source) {
  const where = channelName(source.channelId);
  if (source.guildId === null || source.guildId === undefined) return where;
  return where.startsWith("#") ? `${where} in ${state.config.guild.name}` : `${where} (${guildName(source.guildId)})`;
}

function memoryNode(memory) {
  const sources = memory.sources;
  return el("li", { class: "memory" },
    el("p", { class: "memory-text" }, el("strong", {}, `#${memory.id} `), memory.content),
    el("p", { class: "meta" },
      `source: ${memory.source} · learned in: ${describeOrigin(memory.origin)}`,
      ` · updated ${clock(memory.updatedAt)}`),
    sources.length ? el("details", {}, el("summary", {}, `${sources.length} source${sources.length > 1 ? "s" : ""}`),
      el("ul", {}, sources.map((s) => el("li", { class: "source" }, `${sourcePlace(s)}: `, el("a", { href: s.link }, s.link))))) : null);
}

async function loadLedger(older = false) {
  const before = older && state.ledgerBefore ? `&before=${state.ledgerBefore}` : "";
  // The console's own reads (two a refresh) would bury the real events: hidden unless asked.
  const hide = $("ledger-admin").checked ? "" : "&hideAdminReads=true";
  const answer = await admin("GET", `/users/${consolePerson()}/memory-log?limit=20${before}${hide}`);
  const list = $("ledger");
  if (!older) list.replaceChildren();
  $("ledger-older").hidden = true;
  if (!answer.ok) return status("ledger-state", `error ${answer.status}`, true);
  const entries = answer.data.rows; // LedgerPage: newest first, nextBefore for the next page
  status("ledger-state", entries.length || older ? "" : "No ledger entries yet.");
  for (const entry of entries) list.append(ledgerNode(entry));
  state.ledgerBefore = answer.data.nextBefore;
  $("ledger-older").hidden = answer.data.nextBefore === null;
}

function ledgerNode(entry) {
  const { memoryId, runId } = entry;
  const detail = JSON.stringify({ before: entry.before, after: entry.after });
  return el("li", { class: `entry action-${entry.action}` },
    el("time", { datetime: entry.createdAt }, clock(entry.createdAt)),
    el("span", { class: "action" }, entry.action),
    ` by ${entry.actor}`,
    memoryId !== null && memoryId !== undefined ? ` · memory #${memoryId}` : "",
    runId ? ` · run #${runId}` : "",
    entry.reason ? ` · ${entry.reason}` : "",
    el("details", {}, el("summary", {}, "before / after"), el("pre", {}, detail)));
}

async function loadRuns() {
  const answer = await admin("GET", "/nightly/runs");
  const list = $("runs");
  if (!answer.ok) return list.replaceChildren(el("li", { class: "bad" }, `error ${answer.status}`));
  const runs = answer.data; // list[NightlyRunBody], newest first
  if (!runs.length) return list.replaceChildren(el("li", {}, "No nightly runs yet."));
  list.replaceChildren(...runs.map(runNode));
  return runs;
}

function runNode(run) {
  const s = run.summary || {};
  const counts = ["added", "updated", "deleted", "decayed"].map((k) => `${k} ${(s[k] || []).length}`).join(", ");
  const rolledBack = run.rolledBackAt;
  return el("li", { class: "run", id: `run-${run.id}` },
    el("p", {}, el("strong", {}, `Run #${run.id}`), ` ${run.day} · ${rolledBack ? "rolled back" : run.status}${run.step ? ` (${run.step})` : ""}`),
    el("p", { class: "meta" }, counts, run.diary ? ` · diary: ${run.diary}` : ""),
    !rolledBack && run.status !== "running"
      ? el("button", { type: "button", onclick: () => dryRun(run.id) }, `Roll back run #${run.id}…`) : null);
}

async function runNightly() {
  status("nightly-status", "starting a nightly run…");
  const answer = await admin("POST", "/nightly/run");
  if (answer.status === 409) return status("nightly-status", `Today already has run #${answer.data.runId}; roll it back to run again.`, true);
  if (!answer.ok) return status("nightly-status", `could not start: ${answer.status}`, true);
  const runId = answer.data.runId;
  status("nightly-status", `Run #${runId} started for ${answer.data.day}…`);
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    const runs = (await loadRuns()) || [];
    const run = runs.find((r) => r.id === runId);
    if (run && run.status !== "running") {
      const s = run.summary || {};
      status("nightly-status", `Run #${runId} ${run.status}: added ${(s.added || []).length}, updated ${(s.updated || []).length}, deleted ${(s.deleted || []).length}.`);
      return refreshConsole();
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  status("nightly-status", `Run #${runId} is still running; refresh later.`, true);
}

function reportNode(report) {
  const line = (label, ids) => el("li", {}, `${label}: ${ids.length ? ids.map((i) => "#" + i).join(", ") : "none"}`);
  return el("ul", {},
    line("memories it added, to delete", report.deleted || []),
    line("memories it changed, to restore", report.restored || []),
    line("memories it deleted, to bring back", report.reinserted || []),
    ...(report.skipped || []).map((s) => el("li", {}, `skipped #${s.memoryId} (${s.action}): ${s.reason}`)));
}

async function dryRun(runId) {
  const answer = await admin("POST", "/memory/rollback", { runId, dryRun: true });
  if (answer.status === 409) return status("nightly-status", `Run #${runId} is already rolled back.`, true);
  if (!answer.ok) return status("nightly-status", `dry run failed: ${answer.status}`, true);
  state.pendingRollback = runId;
  $("rollback-title").textContent = `Dry run: rolling back run #${runId} would change`;
  $("rollback-report").replaceChildren(reportNode(answer.data));
  $("rollback").hidden = false;
  $("rollback-confirm").focus();
}

async function confirmRollback() {
  const runId = state.pendingRollback;
  if (!runId) return;
  const answer = await admin("POST", "/memory/rollback", { runId });
  $("rollback").hidden = true;
  state.pendingRollback = null;
  if (!answer.ok) return status("nightly-status", `rollback failed: ${answer.status}`, true);
  const d = answer.data;
  status("nightly-status", `Rolled back run #${runId}: deleted ${d.deleted.length}, restored ${d.restored.length}, brought back ${d.reinserted.length}, skipped ${d.skipped.length}.`);
  await refreshConsole();
}

function cancelRollback() {
  state.pendingRollback = null;
  $("rollback").hidden = true;
  status("nightly-status", "Rollback cancelled; nothing changed.");
}

async function loadDead() {
  const answer = await admin("GET", "/inbox/dead");
  const panel = $("dead");
  if (!answer.ok) return panel.replaceChildren(el("p", { class: "bad" }, `error ${answer.status}`));
  const { events, total } = answer.data; // DeadLettersBody
  if (!events.length) return panel.replaceChildren(el("p", {}, "No dead letters."));
  panel.replaceChildren(
    el("p", { class: "meta" }, `${total} dead letter${total === 1 ? "" : "s"}`),
    el("ul", {}, events.map((event) => el("li", {},
      `${event.id} · ${event.type} · ${event.attempts} attempts · ${event.lastError ?? "no error recorded"} `,
      el("button", { type: "button", onclick: () => replay(event.id) }, `Replay ${event.id}`)))));
}

async function replay(eventId) {
  const answer = await admin("POST", `/inbox/${encodeURIComponent(eventId)}/replay`);
  status("nightly-status", answer.status === 202 ? `Event ${eventId} queued again.` : `replay answered ${answer.status}`, answer.status !== 202);
  await loadDead();
}

async function refreshConsole({ auto = false } = {}) {
  if (!auto) state.ledgerPaged = false;
  // An automatic refresh leaves the ledger alone while someone reads older pages.
  const ledger = auto && state.ledgerPaged ? null : loadLedger();
  await Promise.all([loadMemories(), ledger, loadRuns(), loadDead()]);
}

// The console refreshes from the live feed, not on a timer: after something happens, and a
// few times more while the memory job that follows a reply runs (the server logs an
// operator's read once per change of the profile, so a refresh that finds nothing new adds
// no ledger row), or when "Refresh" is pressed.
const FOLLOW_UPS_MS = [600, 2500, 6000, 12000];
let consoleTimers = [];
function consoleSoon() {
  consoleTimers.forEach(clearTimeout);
  consoleTimers = FOLLOW_UPS_MS.map((ms) => setTimeout(() => {
    if (!document.hidden && !state.pendingRollback) refreshConsole({ auto: true });
  }, ms));
}

// --- wiring -----------------------------------------------------------------------------

function choosePerson(id) {
  const wasDm = state.channel && isDm(state.channel);
  state.me = person(id);
  $("console-person").value = id;
  const dm = $("dm-button");
  dm.dataset.channel = state.me.dmChannel;
  $("dm-label").textContent = `${state.config.bot.name} (${state.me.name}'s DM)`;
  showChannel(wasDm ? state.me.dmChannel : state.channel);
  refreshConsole();
}

// The page's config (the tokens it sends) comes once for the link `python -m app dev` printed
// (/playground?t=…): that request sets this browser's session cookie (HttpOnly), and later
// ones (a reload, the feed, uploads) ride on it. The token leaves the address bar at once.
async function loadConfig() {
  const token = new URLSearchParams(location.search).get("t");
  const response = await fetch("/playground/config.json", {
    headers: token ? { "x-playground-token": token } : {},
  });
  if (token) history.replaceState(null, "", location.pathname);
  const body = await response.json().catch(() => ({}));
  if (!response.ok) throw new Error(body.detail || `the config answered ${response.status}`);
  return body;
}

async function start() {
  state.config = await loadConfig();
  const { config } = state;
  $("bot-name").textContent = config.bot.name;
  $("guild-name").textContent = config.guild.name;
  if (config.modelsNote) {
    $("models-note").textContent = config.modelsNote;
    $("models-note").hidden = false;
  }
  for (const p of config.people) {
    const label = p.staff ? `${p.name} (staff)` : p.name;
    $("who").append(el("option", { value: p.id }, label));
    $("console-person").append(el("option", { value: p.id }, label));
  }
  renderChannels();
  renderMembers();
  $("messages").addEventListener("scroll", () => { if (atEnd()) $("new-messages").hidden = true; });
  $("new-messages").addEventListener("click", toEnd);
  $("dm-button").addEventListener("click", () => showChannel(state.me.dmChannel));
  $("who").addEventListener("change", (e) => choosePerson(e.target.value));
  $("console-person").addEventListener("change", () => refreshConsole());
  $("ledger-admin").addEventListener("change", () => loadLedger());
  $("thread-form").addEventListener("submit", (e) => {
    e.preventDefault();
    run(async () => {
      await startThread($("thread-name").value.trim());
      $("thread-name").value = "";
    });
  });
  $("attach").addEventListener("change", () => {
    $("attached").replaceChildren(...[...$("attach").files].map((f) => el("li", {}, `📎 ${f.name} (${sizeText(f.size)})`)));
  });
  $("refresh").addEventListener("click", () => refreshConsole());
  $("ledger-older").addEventListener("click", () => {
    state.ledgerPaged = true;
    loadLedger(true);
  });
  $("run-nightly").addEventListener("click", () => runNightly());
  $("rollback-confirm").addEventListener("click", () => confirmRollback());
  $("rollback-cancel").addEventListener("click", () => cancelRollback());
  $("cancel-reply").addEventListener("click", cancelReply);
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("text").value.trim();
    const files = [...$("attach").files];
    if (!text && !files.length) return;
    run(async () => {
      await sendMessage(text, files);
      $("text").value = "";
      $("attach").value = "";
      $("attached").replaceChildren();
      cancelReply();
    });
  });
  $("text").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("composer").requestSubmit(); }
    if (e.key === "Escape") cancelReply();
  });
  state.channel = config.guild.channels[0].id;
  choosePerson(config.people[0].id);
  follow();
}

Object.assign(hooks, { state, dispatch, el, status, isDm, run });
window.playground = hooks;

start().catch((error) => status("live", `could not load the playground: ${error}`, true));
