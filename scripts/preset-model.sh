# shellcheck shell=bash
# Sourced by scripts/speed-table.sh and scripts/cap-table.sh: the model file
# of a preset, generated when missing.
#
# preset_model TOOL PIPE MODELS OUT PRESET [LAYERS] sets f (the file:
# MODELS/PRESET.gguf, or MODELS/PRESET-LN.gguf for a cut of the first N
# layers, a name of its own that is never mistaken for the whole model), row
# (the preset as a table names it) and made (1 when this call generated the
# file with `pipe gen --preset PRESET [--layers N] --seed 1`, its log in
# OUT/PRESET-gen.log; empty when the file was there). A failed gen exits the
# script with a message prefixed by TOOL.
preset_model() {
  local tool=$1 pipe=$2 models=$3 out=$4 preset=$5 layers=${6:-} cut=()
  f="$models/$preset.gguf" made='' row=$preset
  if [ -n "$layers" ]; then
    f="$models/$preset-L$layers.gguf" cut=(--layers "$layers") row="$preset (first $layers layers)"
  fi
  if [ ! -f "$f" ]; then
    "$pipe" gen --preset "$preset" "${cut[@]}" --seed 1 -o "$f" --log-format json 2>"$out/$preset-gen.log" ||
      { echo "$tool: pipe gen --preset $preset failed, see $out/$preset-gen.log" >&2; exit 1; }
    made=1
  fi
}
