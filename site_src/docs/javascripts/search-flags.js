/* kvkb: let people paste errors and type flags into the search box.
 *
 * Material's search runs lunr, whose query syntax treats a word's leading "-" as NOT, a leading
 * "+" as MUST, "--flag" and "`--flag`" as syntax errors (no results at all), "word:" as a field
 * name (a path like "x.pkl): CUDA" is a syntax error too), and "~" / "^" as fuzziness / boost
 * operators, and "*" as a wildcard. Material itself turns text in double quotes into MUST terms, so a pasted traceback
 * (File "/usr/lib/...", line 8) required every path part and found nothing. vLLM errors are full
 * of `--flag`s and quotes, so a pasted error or a typed flag would find nothing. The index splits
 * on '-' anyway (see the search separator in mkdocs.yml), so dropping those operator characters
 * loses nothing.
 *
 * Material also appends a prefix wildcard to every word ("0" -> "0*"), which suits a word being
 * typed but makes a pasted line noisy: "GPU 0" then matches every version number (0.32.0, ...),
 * "3" every number starting with 3. A word followed by more text is complete, so it is searched
 * exactly ("^1": a neutral boost, which material leaves without a wildcard); only the last word,
 * the one possibly still being typed, stays a prefix.
 *
 * The rewrite is applied to the message sent to the search worker, so the search box keeps
 * showing what the user typed.
 */
(function () {
  var QUERY = 2; // SearchMessageType.QUERY in material's search worker protocol

  function plainQuery(text) {
    var words = text
      .replace(/[~^:"*]/g, " ")
      // every '-' goes: lunr reads a '-' that starts a lexeme as NOT, and that includes the second
      // dash of "models--TheBloke" in a pasted path (the first one only separates)
      .replace(/-+/g, " ")
      .replace(/(^|[^\w])\++(?=\w)/g, "$1 ")
      .split(/\s+/)
      .filter(function (word) { return /\w/.test(word); });
    var typing = /\S$/.test(text); // trailing space or newline: the last word is complete too
    return words
      .map(function (word, i) { return typing && i === words.length - 1 ? word : word + "^1"; })
      .join(" ");
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
