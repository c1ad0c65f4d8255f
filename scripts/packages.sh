# Sourced (bash or sh): build_packages SYSTEM FILE prints the packages FILE
# (scripts/build-packages.txt) names for SYSTEM (bookworm, trixie or device), one per
# line, in the file's order.
build_packages() {
  awk -v want="$1" '{ sub(/#.*/, "") } NF > 1 { for (i = 2; i <= NF; i++) if ($i == want) { print $1; break } }' "$2"
}
