/* kvkb: let people search for command-line flags as they type them.
 *
 * Material's search runs lunr, whose query syntax reads a leading "-" as NOT, and "--flag" as a
 * syntax error: "--max-model-len" finds nothing. The index splits on '-' (see the search separator
 * in mkdocs.yml), so dropping a word's leading dashes loses nothing. The rewrite happens on the
 * message to the search worker, so the search box keeps showing what the user typed.
 */
(function () {
  var QUERY = 2; // SearchMessageType.QUERY in material's search worker protocol
  var post = Worker.prototype.postMessage;
  Worker.prototype.postMessage = function (message) {
    if (message && message.type === QUERY && typeof message.data === "string") {
      var args = Array.prototype.slice.call(arguments);
      args[0] = { type: message.type, data: message.data.replace(/(^|\s)-+(?=\w)/g, "$1") };
      return post.apply(this, args);
    }
    return post.apply(this, arguments);
  };
})();
