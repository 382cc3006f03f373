// pyql serve: helpers shared by the pages. Text is always set with textContent (data is data).
"use strict";
const pyql = (() => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("data-")) node.setAttribute(key, String(value));
      else node.setAttribute(key, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      body: JSON.stringify(body || {}),
      credentials: "same-origin",
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (!response.ok) {
      const error = (data && data.error) || {type: "HttpError", message: response.statusText};
      const failure = new Error(error.message);
      failure.info = error;
      throw failure;
    }
    return data;
  }

  async function get(url) {
    const response = await fetch(url, {credentials: "same-origin"});
    const data = await response.json();
    if (!response.ok) {
      const failure = new Error((data.error && data.error.message) || response.statusText);
      failure.info = data.error;
      throw failure;
    }
    return data;
  }

  // Pygments' HTML of a query (escaped by Pygments on the server) into `box`
  function setHighlighted(box, html) {
    const template = document.createElement("template");
    template.innerHTML = html;
    box.replaceChildren(template.content);
  }

  function json(id) {
    return JSON.parse(document.getElementById(id).textContent);
  }

  return {el, post, get, setHighlighted, json, csrf};
})();
