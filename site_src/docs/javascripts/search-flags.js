/* kvkb: let people paste errors and type flags into the search box.
 *
 * Material's search runs lunr, whose query syntax treats a word's leading "-" as NOT, a leading
 * "+" as MUST, "--flag" and "`--flag`" as syntax errors (no results at all), "word:" as a field
 * name (a path like "x.pkl): CUDA" is a syntax error too), and "~" / "^" as fuzziness / boost
 * operators. vLLM errors are full of `--flag`s, so a pasted error or a typed
 * flag would find nothing. The index splits on '-' anyway (see the search separator in
 * mkdocs.yml), so dropping those operator characters loses nothing. The rewrite is applied to the
 * message sent to the search worker, so the search box keeps showing what the user typed.
 */
(function () {
  var QUERY = 2; // SearchMessageType.QUERY in material's search worker protocol

  function plainQuery(text) {
    return text
      .replace(/[~^:]/g, " ")
      .replace(/(^|[^\w-])[-+]+(?=\w)/g, "$1 ");
  }

  var post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message) {
    if (message && message.type === QUERY && typeof message.data === "string") {
      var args = Array.prototype.slice.call(arguments);
      args[0] = { type: message.type, data: plainQuery(message.data) };
      return post.apply(this, args);
    }
    return post.apply(this, arguments);
  };
})();
