// Building DOM from data without innerHTML: every value from the API lands as text, never as markup.

const SVG_TAGS = new Set(["svg", "circle", "line", "path", "polygon", "rect"]);

/** An element: `attrs` are attributes (null/false skip one, true sets an empty one); children are nodes or text. */
export function h(tag, attrs = {}, ...children) {
  const svg = SVG_TAGS.has(tag);
  const element = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    element.setAttribute(name, value === true ? "" : String(value));
  }
  element.append(...children.flat(Infinity).filter((child) => child != null && child !== false));
  return element;
}

/** A list of text items, or a muted "none" when empty. */
export function textList(items, label) {
  if (!items || items.length === 0) return h("p", { class: "muted" }, "none");
  return h("ul", { "aria-label": label }, items.map((item) => h("li", {}, item)));
}

/** A <dl> of [term, description] pairs. */
export function facts(pairs) {
  return h(
    "dl",
    { class: "facts" },
    pairs.map(([term, description]) => [h("dt", {}, term), h("dd", {}, description)]),
  );
}
