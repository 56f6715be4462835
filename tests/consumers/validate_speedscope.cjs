// Validate a speedscope JSON file against the schema that the npm
// `speedscope` package ships (dist/release/file-format-schema.json), with ajv.
//
// usage: node validate_speedscope.cjs FILE   -> {"valid": bool, "errors": [...]}
'use strict';
const fs = require('fs');
const Ajv = require('ajv');

const schema = JSON.parse(fs.readFileSync(
	require.resolve('speedscope/dist/release/file-format-schema.json'), 'utf8'));
const ajv = new Ajv({ allErrors: true, strict: false });
const validate = ajv.compile(schema);
const data = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const valid = validate(data);
process.stdout.write(JSON.stringify({ valid, errors: validate.errors || [] }) + '\n');
