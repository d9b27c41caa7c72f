package dev.logwheel.registry;

import java.net.URI;
import java.util.Set;
import javax.ws.rs.container.ContainerRequestContext;
import javax.ws.rs.container.ContainerRequestFilter;
import javax.ws.rs.container.PreMatching;
import javax.ws.rs.core.UriBuilder;
import javax.ws.rs.ext.Provider;

/**
 * Serves Apicurio's Confluent-compatible API at the root, where Confluent Schema Registry
 * serves it: a client given {@code http://127.0.0.1:PORT} asks for {@code /subjects/...},
 * which Apicurio answers only under {@code /apis/ccompat/v7}.
 */
@Provider
@PreMatching
public class ConfluentApiAtRoot implements ContainerRequestFilter {
    private static final String BASE = "/apis/ccompat/v7";
    private static final Set<String> ROOTS =
            Set.of("subjects", "schemas", "config", "compatibility", "mode", "contexts");

    @Override
    public void filter(ContainerRequestContext request) {
        URI uri = request.getUriInfo().getRequestUri();
        String path = uri.getRawPath();
        String first = path.replaceFirst("^/+", "").split("/", 2)[0];
        if (ROOTS.contains(first)) {
            request.setRequestUri(UriBuilder.fromUri(uri).replacePath(BASE + path).build());
        }
    }
}
