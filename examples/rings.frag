#version 450
// Procedural: concentric rings around a moving centre over a two-colour gradient.
// `kiln run examples/rings.frag --size 64x64 -o rings.png [--set progress=0.5]`

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

layout(set = 0, binding = 0) uniform Params {
    float progress;
    float rings;
};

void main() {
    vec2 centre = vec2(0.3 + 0.4 * progress, 0.5);
    float d = length(uv - centre);
    float n = rings > 0.0 ? rings : 6.0;
    float band = fract(d * n - progress);
    float ring = smoothstep(0.35, 0.5, band) * (1.0 - smoothstep(0.5, 0.65, band));
    vec3 base = mix(vec3(0.1, 0.15, 0.35), vec3(0.95, 0.6, 0.2), uv.y);
    vec3 c = mix(base, vec3(1.0), ring);
    color = vec4(c * (1.0 - 0.5 * d), 1.0);
}
