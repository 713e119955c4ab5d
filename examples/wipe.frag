#version 450
// Textured: a soft diagonal wipe from one texture to another as `progress` goes from 0 to 1.
// `kiln run examples/wipe.frag --size 64x64 -o wipe.png [--set progress=0.5]
//  [--texture 0=from.png --texture 1=to.png]` (a built-in checkerboard for each one not given)

layout(location = 0) in vec2 uv;
layout(location = 0) out vec4 color;

layout(set = 0, binding = 0) uniform texture2D from_image;
layout(set = 0, binding = 1) uniform texture2D to_image;
layout(set = 0, binding = 2) uniform sampler image_sampler;
layout(set = 0, binding = 3) uniform Transition {
    float progress;
};

void main() {
    vec4 a = texture(sampler2D(from_image, image_sampler), uv);
    vec4 b = texture(sampler2D(to_image, image_sampler), uv * 2.0);
    float edge = progress * 1.4 - 0.2;
    float along = 0.7 * uv.x + 0.3 * uv.y;
    float t = smoothstep(edge - 0.2, edge + 0.2, along);
    vec4 tint = vec4(0.6, 0.8, 1.0, 1.0);
    color = mix(b * tint, a, t);
}
