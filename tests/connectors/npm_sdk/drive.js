// Drives the vendor's npm SDK (carsxe-api 1.4.0, as shipped) against the sandbox.
// Usage: SANDBOX_URL=http://127.0.0.1:PORT node drive.js calls.json answers.json
// calls.json: [{"method": "specs", "key": "...", "params": {...}}, ...], run one after another.
// answers.json: {"methods": [every public method of the SDK], "answers": [{"body"} or {"error"}, ...]}
// Answers go to a file, not stdout: the SDK's vinOcr prints its request URL (key included) there.
'use strict';
const fs = require('fs');
const { CarsXE } = require('carsxe-api');

// The SDK hard-codes https://api.carsxe.com here; nothing else is changed.
CarsXE.prototype.getBaseUrl = () => process.env.SANDBOX_URL;

async function main() {
  const [callsPath, answersPath] = process.argv.slice(2);
  const calls = JSON.parse(fs.readFileSync(callsPath, 'utf8'));
  const answers = [];
  for (const { method, key, params } of calls) {
    try {
      answers.push({ body: await new CarsXE(key)[method](params) });
    } catch (error) {
      answers.push({ error: String(error) });
    }
  }
  const methods = Object.getOwnPropertyNames(CarsXE.prototype)
    .filter((name) => !['constructor', 'getBaseUrl', 'buildUrl'].includes(name));
  fs.writeFileSync(answersPath, JSON.stringify({ methods, answers }));
}

main().catch((error) => {
  process.stderr.write(`${error}\n`);
  process.exit(1);
});
