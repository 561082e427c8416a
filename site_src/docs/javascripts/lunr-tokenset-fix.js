/* kvkb: runs inside material's search worker, after it (overrides/main.html loads the worker
 * through a small wrapper that imports material's script, then this one).
 *
 * lunr (2.3.9, bundled in material's worker) shares identical suffix trees of its token set
 * (the index's word list, which wildcard and fuzzy queries expand through) by a key made of each
 * node's edge labels and child ids run together: "1" + id 23 and "1" + id 2, "3" + id 4 both
 * read "1234". The index's many numbers make such keys collide, two different subtrees are then
 * merged, and a prefix query that reaches the merged node expands to a word the index does not
 * hold: lunr throws, and material shows no result at all. A pasted "Cuda failure 2" did that
 * (the last word stays a prefix, "2*"), and any change to the pages can move the collision.
 *
 * The same key with separators cannot collide: labels are single characters, ids digits. */
(function (root) {
  var lunr = root.lunr;
  if (!lunr || !lunr.TokenSet) return;
  lunr.TokenSet.prototype.toString = function () {
    if (this._str) return this._str;
    var str = this.final ? "1" : "0", labels = Object.keys(this.edges).sort();
    for (var i = 0; i < labels.length; i++) str += labels[i] + ":" + this.edges[labels[i]].id + ",";
    return str;
  };
  lunr.TokenSet.kvkbKeyFixed = true;
})(typeof self !== "undefined" ? self : globalThis);
