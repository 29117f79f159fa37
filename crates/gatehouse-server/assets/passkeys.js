// The passkey ceremonies (D56), served by the binary under a CSP without
// 'unsafe-inline'. A form with `data-passkey` ("create" or "get") carries
// the options from the server in `data-options`; this script asks the
// browser's authenticator, puts its answer (the credential's JSON) in the
// form's `answer` field and posts the form. Without script, or in a
// browser without WebAuthn's JSON helpers, the forms stay hidden and the
// password and code forms work as they are.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  var PKC = window.PublicKeyCredential;
  if (!PKC || !PKC.parseCreationOptionsFromJSON || !PKC.parseRequestOptionsFromJSON || !navigator.credentials) return;
  var forms = document.querySelectorAll("form[data-passkey]");
  Array.prototype.forEach.call(forms, function (form) {
    var kind = form.getAttribute("data-passkey");
    var options;
    try {
      options = JSON.parse(form.getAttribute("data-options"));
    } catch (e) {
      return;
    }
    var status = form.querySelector(".passkey-status");
    var button = form.querySelector("button[type=submit]");
    form.hidden = false;
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (status) status.textContent = "Waiting for your passkey…";
      if (button) button.disabled = true;
      var asked = kind === "create"
        ? navigator.credentials.create({ publicKey: PKC.parseCreationOptionsFromJSON(options) })
        : navigator.credentials.get({ publicKey: PKC.parseRequestOptionsFromJSON(options) });
      asked.then(function (credential) {
        form.elements.answer.value = JSON.stringify(credential.toJSON());
        form.submit();
      }, function (error) {
        if (button) button.disabled = false;
        if (status) {
          status.textContent = error && error.name === "NotAllowedError"
            ? "No passkey was used. Try again, or use the other way."
            : "The passkey did not work in this browser. Use the other way.";
        }
      });
    });
  });
});
